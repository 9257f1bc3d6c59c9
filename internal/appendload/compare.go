package appendload

import (
	"cmp"
	"context"
	"slices"
)

// A Round is one saturated round of a subject server and, when there is
// one, its peer, at one client count.
type Round struct {
	Journal   float64 `json:"journal_per_sec"`
	Peer      float64 `json:"tessera_posix_per_sec,omitempty"`
	PeerFirst bool    `json:"tessera_first,omitempty"`
	Load      float64 `json:"load_average"` // 1 minute, when the round started
}

// A Comparison is what Compare measured: each side's median saturated
// round, its open loop, and every round.
type Comparison struct {
	Max, Open         Result
	PeerMax, PeerOpen Result // zero without a peer
	Rounds            []Round
}

// Compare drives subject (and peer, when peer.AddURL or peer.BaseURL is
// set) saturated in n rounds, alternating which goes first so that neither
// always meets the machine's later load or the other's leftovers (its
// files, idle connections, the load generator's garbage); then each side's
// open loop once at 80% of its own median saturated rate. load, if set,
// reads the machine's load average at the start of each round; progress,
// if set, is told before each saturated run.
func Compare(ctx context.Context, subject, peer Config, n int, load func() float64, progress func(round int, isPeer bool)) (Comparison, error) {
	hasPeer := peer.AddURL != "" || peer.BaseURL != ""
	var sr, pr []Result
	rounds := make([]Round, max(n, 1))
	for i := range rounds {
		rd := &rounds[i]
		if load != nil {
			rd.Load = load()
		}
		rd.PeerFirst = hasPeer && i%2 == 1
		order := []bool{false, true} // is the peer
		if rd.PeerFirst {
			order = []bool{true, false}
		}
		for _, isPeer := range order {
			if isPeer && !hasPeer {
				continue
			}
			cfg := subject
			if isPeer {
				cfg = peer
			}
			if progress != nil {
				progress(i+1, isPeer)
			}
			res, err := Run(ctx, cfg)
			if err != nil {
				return Comparison{}, err
			}
			if isPeer {
				rd.Peer = res.Throughput
				pr = append(pr, res)
			} else {
				rd.Journal = res.Throughput
				sr = append(sr, res)
			}
		}
	}
	c := Comparison{Max: Median(sr), PeerMax: Median(pr), Rounds: rounds}
	open := func(cfg Config, max Result) (Result, error) {
		if cfg.Rate = 0.8 * max.Throughput; cfg.Rate <= 0 {
			return Result{}, nil
		}
		return Run(ctx, cfg)
	}
	var err error
	if c.Open, err = open(subject, c.Max); err != nil {
		return c, err
	}
	if hasPeer {
		if c.PeerOpen, err = open(peer, c.PeerMax); err != nil {
			return c, err
		}
	}
	return c, nil
}

// RoundRatio is the median of the rounds' own journal/peer ratios: each
// compares two runs made a moment apart, so it is steadier under a
// changing load than the ratio of the two medians. Zero without a peer.
func (c Comparison) RoundRatio() float64 {
	var rs []float64
	for _, rd := range c.Rounds {
		if rd.Peer > 0 {
			rs = append(rs, rd.Journal/rd.Peer)
		}
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}

// Median is the result of median throughput (the upper one of an even
// count), or the zero Result of none.
func Median(rs []Result) Result {
	if len(rs) == 0 {
		return Result{}
	}
	s := slices.Clone(rs)
	slices.SortFunc(s, func(x, y Result) int { return cmp.Compare(x.Throughput, y.Throughput) })
	return s[len(s)/2]
}
