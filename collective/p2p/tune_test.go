package p2p

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if v := os.Getenv("YAMUX"); v != "" {
		fmt.Sscanf(v, "%d,%d,%d", &yamuxInitialWindow, &yamuxMaxWindow, &yamuxMaxMessage)
	}
	os.Exit(m.Run())
}
