package membership

import (
	"fmt"
	"slices"
	"strings"
)

// Reachable checks the schedule's next change (index next) against the
// run's last step, total, counted as the generation now starting counts
// its steps (a change's step is numbered as the run was before it, so
// only the next one can be checked here; each later one is checked when
// its generation starts). A change after the last step would never be
// replayed, in silence: it is refused, wrapping ErrPastEnd.
func Reachable(s []Change, next, total int) error {
	if next < 0 || next >= len(s) || s[next].Step <= total {
		return nil
	}
	return fmt.Errorf("elastic: --membership-schedule: %w: change %d of %d is at step %d, and this run ends at step %d (was the record made with more epochs, more data or a smaller batch?)",
		ErrPastEnd, next+1, len(s), s[next].Step, total)
}

// Replay is the verdict on a replayed schedule: whether every change
// happened, at its step, with its members, and whether the final
// parameters equal the record's.
type Replay struct {
	Changes, Matched int
	Differences      []string // one line per change that did not happen as recorded
	// ParamsChecked says the record had a parameters hash; ParamsEqual
	// that the run ended with it.
	ParamsChecked, ParamsEqual bool
}

// OK says the replay reproduced the record: every change as recorded,
// and the parameters where the record has them.
func (r Replay) OK() bool {
	return r.Matched == r.Changes && len(r.Differences) == 0 && (!r.ParamsChecked || r.ParamsEqual)
}

// String is the verdict in one line, for the run's log.
func (r Replay) String() string {
	var b strings.Builder
	if r.Matched == r.Changes && len(r.Differences) == 0 {
		fmt.Fprintf(&b, "replay: every one of the %d recorded membership changes happened at its step", r.Changes)
	} else {
		fmt.Fprintf(&b, "replay: %d of the %d recorded membership changes happened as recorded: %s", r.Matched, r.Changes, strings.Join(r.Differences, "; "))
	}
	switch {
	case !r.ParamsChecked:
		b.WriteString("; the record has no parameters hash to compare")
	case r.ParamsEqual:
		b.WriteString("; the final parameters equal the record's, bit for bit")
	default:
		b.WriteString("; the final parameters DIFFER from the record's")
	}
	return b.String()
}

// CheckReplay compares a replayed run's membership record (happened) and
// final parameters' hash with the schedule's record. A scheduled change
// between commits happens at the next commit: that is a difference of
// step, reported, as the record no longer says where the run changed.
func CheckReplay(rec Record, happened []Change, params string) Replay {
	r := Replay{Changes: len(rec.Changes), ParamsChecked: rec.ParamsSHA256 != "" && params != ""}
	r.ParamsEqual = r.ParamsChecked && rec.ParamsSHA256 == params
	for i, want := range rec.Changes {
		if i >= len(happened) {
			r.Differences = append(r.Differences, fmt.Sprintf("change %d (step %d, members %v) never happened", i+1, want.Step, want.Members))
			continue
		}
		got := happened[i]
		switch {
		case !slices.Equal(got.Members, want.Members):
			r.Differences = append(r.Differences, fmt.Sprintf("change %d went to members %v at step %d, the record to %v at step %d", i+1, got.Members, got.Step, want.Members, want.Step))
		case got.Step != want.Step:
			r.Differences = append(r.Differences, fmt.Sprintf("change %d happened at step %d, recorded at step %d", i+1, got.Step, want.Step))
		default:
			r.Matched++
		}
	}
	if extra := len(happened) - len(rec.Changes); extra > 0 {
		r.Differences = append(r.Differences, fmt.Sprintf("%d change(s) not in the record (a peer lost or joined during the replay)", extra))
	}
	return r
}
