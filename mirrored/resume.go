package mirrored

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/nn"
	"go.uber.org/zap"
)

// resumePoint (chief only) is its part of the start-up handshake: the
// checkpoint to resume from (findCheckpoint; nil if none), where it
// resumes with what to warn of, and any problem as text for every replica
// to report.
func (j *Job) resumePoint(settings []setting, fp string, nparams, nstate int) (*checkpoint.Checkpoint, *resumePos, string) {
	ck, path, warnings, err := j.findCheckpoint(settings, fp, nparams, nstate)
	if err != nil {
		return nil, nil, err.Error()
	}
	if ck == nil {
		return nil, nil, ""
	}
	var hist []Epoch
	problem := ""
	if ck.History != "" {
		if err := json.Unmarshal([]byte(ck.History), &hist); err != nil {
			problem = fmt.Sprintf("checkpoint %s: metadata history: %v", path, err)
		}
	}
	// StepsPerEpoch: an elastic run's checkpoint may come from another
	// number of peers (its fingerprint leaves it out); the resume then
	// keeps the share of the epoch done.
	return ck, &resumePos{Path: path, Step: ck.Step, Epoch: ck.Epoch, StepInEpoch: ck.StepInEpoch, StepsPerEpoch: ck.StepsPerEpoch, History: hist, Warnings: warnings}, problem
}

// findCheckpoint (chief only) loads the checkpoint to resume from
// (loadCheckpoint) and checks that it belongs to this configuration.
func (j *Job) findCheckpoint(settings []setting, fp string, nparams, nstate int) (*checkpoint.Checkpoint, string, []string, error) {
	ck, path, warnings, err := j.loadCheckpoint()
	if err != nil || ck == nil {
		return nil, "", nil, err
	}
	if ck.Fingerprint != fp {
		if err := j.extends(ck, path, settings); err != nil {
			return nil, "", nil, err
		}
	}
	if len(ck.Params) != nparams || len(ck.OptState) != nstate {
		return nil, "", nil, fmt.Errorf("checkpoint %s holds %d parameters and %d optimizer values, this model has %d and %d", path, len(ck.Params), len(ck.OptState), nparams, nstate)
	}
	return ck, path, warnings, nil
}

// loadCheckpoint (chief only) is the checkpoint to resume from
// (checkpoint.Resumable over CheckpointDir and Restore), logging the
// half-written files it removed.
func (j *Job) loadCheckpoint() (*checkpoint.Checkpoint, string, []string, error) {
	ck, path, warnings, removed, err := checkpoint.Resumable(j.CheckpointDir, j.Restore)
	for _, p := range removed {
		j.logger().Warn("removed a half-written checkpoint left by a killed run", zap.String("path", p))
	}
	return ck, path, warnings, err
}

// extends returns nil when ck differs from this run's settings in the
// number of epochs alone and the run may continue it bit for bit: a
// finished (or unfinished) run extended, as Keras's initial_epoch does,
// or cut short. That holds when the learning-rate schedule does not
// depend on the run's total steps (constant, step, any warm-up; sparse
// runs are constant); the cosine schedule does, so a longer run would have
// had another rate at every step, and it is refused with that reason. A
// checkpoint already past this run's last epoch is refused too. Any other
// difference is otherConfig's error.
func (j *Job) extends(ck *checkpoint.Checkpoint, path string, settings []setting) error {
	var saved map[string]string
	if err := json.Unmarshal([]byte(ck.Config), &saved); err != nil {
		return otherConfig(ck, path, settings, "")
	}
	theirs := slices.Clone(settings)
	mine := ""
	for i, s := range theirs {
		if s.Name == "epochs" {
			mine, theirs[i].Value = s.Value, saved["epochs"]
		}
	}
	if mine == saved["epochs"] || fingerprint(theirs) != ck.Fingerprint {
		return otherConfig(ck, path, settings, fingerprint(settings))
	}
	if j.Sparse == nil && j.Config.Schedule == nn.ScheduleCosine {
		return fmt.Errorf("checkpoint %s was written by a run of %s epochs, this one has %s: the cosine schedule decays over the run's total steps, so a run of %s epochs would have had another learning rate at every step and cannot continue this one; resume with --epochs %s, or start afresh (another --checkpoint-dir); runs on a constant or step schedule can be extended",
			path, saved["epochs"], mine, mine, saved["epochs"])
	}
	// ck.Epoch is the epoch it resumes in (ck.StepInEpoch steps into it).
	if left := ck.Epoch; left > j.Config.Epochs+1 || (left == j.Config.Epochs+1 && ck.StepInEpoch > 0) {
		return fmt.Errorf("checkpoint %s is at epoch %d step %d, past this run's %d epochs: give --epochs %d or more", path, ck.Epoch, ck.StepInEpoch, j.Config.Epochs, ck.Epoch-1)
	}
	j.logger().Info("extending the checkpoint's run", zap.String("checkpoint", path), zap.String("epochs_then", saved["epochs"]), zap.String("epochs_now", mine))
	return nil
}

// otherConfig is the error for a checkpoint written under another
// configuration fingerprint: the settings that differ when its saved
// configuration says (those this run records, and those it leaves out at
// their default but the checkpoint has: a 16-bit wire, sync_batchnorm).
func otherConfig(ck *checkpoint.Checkpoint, path string, settings []setting, fp string) error {
	var saved map[string]string
	if err := json.Unmarshal([]byte(ck.Config), &saved); err == nil {
		var theirs, mine []setting
		for _, s := range settings {
			if _, ok := saved[s.Name]; s.Resume || ok {
				mine = append(mine, s)
				if v, ok := saved[s.Name]; ok {
					theirs = append(theirs, setting{Name: s.Name, Value: v})
				}
			}
		}
		if err := compareSettings([]string{"the checkpoint", "this run"}, [][]setting{theirs, mine}); err != nil {
			return fmt.Errorf("checkpoint %s was written by another configuration: %w: resume with the same flags, or use another --checkpoint-dir", path, err)
		}
	}
	return fmt.Errorf("checkpoint %s was written by another configuration (fingerprint %.12s…, this run %.12s…)", path, ck.Fingerprint, fp)
}
