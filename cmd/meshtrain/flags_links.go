package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/collective"
)

// linkFaultFlags are the fault-injection flags of worker, launch and bench.
func linkFaultFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "link-delay", Usage: "fault injection: delay every frame this peer sends by this one-way delay (e.g. 500us: a 1 ms round trip between two such peers), to emulate a farther network"},
		&cli.StringFlag{Name: "link-rate", Usage: "fault injection: cap each of this peer's outgoing links to this rate (tc units, e.g. 1.8gbit, 100mbit)"},
	}
}

// linkFaultsFromFlags reads linkFaultFlags.
func linkFaultsFromFlags(c *cli.Context) (collective.LinkFaults, error) {
	f := collective.LinkFaults{Delay: c.Duration("link-delay")}
	if f.Delay < 0 {
		return f, fmt.Errorf("--link-delay %v: want ≥ 0", f.Delay)
	}
	if s := c.String("link-rate"); s != "" {
		rate, err := collective.ParseRate(s)
		if err != nil {
			return f, fmt.Errorf("--link-rate: %w", err)
		}
		f.Rate = rate
	}
	return f, nil
}
