package pilot_test

import (
	"context"
	"fmt"
	"os"

	"github.com/pilotworkers/pilot"
)

// A program that dispatches, then goes on without pilot: Shutdown ends the
// supervisor now instead of 5 seconds after the dispatch.
func ExampleShutdown() {
	reg, err := pilot.NewRegistry(pilot.Provider{Name: "sh", Runner: "command", Argv: []string{"/bin/sh", "-c", "echo ok"}})
	if err != nil {
		panic(err)
	}
	runs, _ := os.MkdirTemp("", "pilot-example-")
	defer os.RemoveAll(runs)
	d := &pilot.Dispatcher{Providers: reg, RunDir: runs}
	v, err := d.Dispatch(context.Background(), pilot.Task{Provider: "sh", Mode: pilot.ModeExplore, Prompt: "x", Workdir: os.TempDir()})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Verdict)
	fmt.Println(pilot.Shutdown(context.Background()))
	// Output:
	// completed
	// <nil>
}
