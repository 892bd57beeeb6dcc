package p2p

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if v := os.Getenv("YAMUX"); v != "" {
		fmt.Sscanf(v, "%d,%d,%d", &YamuxInitialWindow, &YamuxMaxWindow, &YamuxMaxMessage)
	}
	os.Exit(m.Run())
}
