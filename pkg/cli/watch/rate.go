package watch

import (
	"time"
)

// rateSample is the progress observed at one time.
type rateSample struct {
	at       time.Time
	progress int
}

// rateMeter measures shards per minute over a sliding window of observed changes.
type rateMeter struct {
	window  time.Duration
	samples []rateSample
}

// observe records progress at now; progress going back (a restart) starts afresh.
func (r *rateMeter) observe(now time.Time, progress int) {
	if n := len(r.samples); n > 0 && progress < r.samples[n-1].progress {
		r.samples = nil
	}
	if n := len(r.samples); n > 0 && r.samples[n-1].progress == progress {
		return // no change: the oldest sample of this level stays, so the rate decays
	}
	r.samples = append(r.samples, rateSample{now, progress})
	// Keep one sample at or before the window's start as the anchor.
	cut := now.Add(-r.window)
	for len(r.samples) > 1 && !r.samples[1].at.After(cut) {
		r.samples = r.samples[1:]
	}
}

// perMinute is the rate over the window at now, and false while there is nothing to
// measure it by (fewer than two observations of different progress).
func (r *rateMeter) perMinute(now time.Time, current int) (float64, bool) {
	if len(r.samples) < 2 {
		return 0, false
	}
	anchor := r.samples[0]
	if cut := now.Add(-r.window); anchor.at.Before(cut) {
		// Progress at the window's start is interpolated between the observations around it:
		// a batch moves steadily between the changes a watch delivers.
		anchor = rateSample{at: cut, progress: r.samples[len(r.samples)-1].progress}
		for i := 1; i < len(r.samples); i++ {
			if a, b := r.samples[i-1], r.samples[i]; b.at.After(cut) {
				f := float64(cut.Sub(a.at)) / float64(b.at.Sub(a.at))
				anchor.progress = a.progress + int(f*float64(b.progress-a.progress))
				break
			}
		}
	}
	span := now.Sub(anchor.at)
	if span <= 0 {
		return 0, false
	}
	return float64(current-anchor.progress) / span.Minutes(), true
}
