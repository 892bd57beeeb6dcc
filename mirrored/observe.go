package mirrored

import (
	"errors"
	"io"
)

// bytesSent is what counted has sent so far, -1 if it does not count.
func bytesSent(counted any) int64 {
	if tr, ok := counted.(Traffic); ok {
		sent, _ := tr.Traffic()
		return sent
	}
	return -1
}

// observers sends each event to every observer in order, stamping the
// rank; it closes those that are io.Closers once (on done, or by close
// when the run fails first).
type observers struct {
	rank   int
	obs    []Observer
	closed bool
}

func (o *observers) emit(e Event) error {
	e.Rank = o.rank
	var errs []error
	for _, ob := range o.obs {
		if err := ob.Observe(e); err != nil {
			errs = append(errs, err)
		}
	}
	if e.Kind == EventDone {
		errs = append(errs, o.close())
	}
	return errors.Join(errs...)
}

func (o *observers) close() error {
	if o.closed {
		return nil
	}
	o.closed = true
	var errs []error
	for _, ob := range o.obs {
		if c, ok := ob.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// newObservers is a replica's fan-out to job's Observers, stamping rank.
func newObservers(job *Job, rank int) *observers {
	return &observers{rank: rank, obs: job.Observers}
}
