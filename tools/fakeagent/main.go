// Command fakeagent is the scripted stand-in for an agent CLI that pilot's
// tests use (internal/fakeagent), as a program of its own: a command
// provider whose argv is this binary and a script tries pilot by hand
// without a model.
//
//	go build -o /tmp/fakeagent ./tools/fakeagent
//	/tmp/fakeagent out=hello err=warning exit=3
//
// Each argument is a step (out=TEXT, err=TEXT, sleep=DURATION, block,
// exit=N, ...; internal/fakeagent's package doc lists them all).
package main

import (
	"os"

	"github.com/pilotworkers/pilot/internal/fakeagent"
)

func main() { os.Exit(fakeagent.Main(os.Args[1:])) }
