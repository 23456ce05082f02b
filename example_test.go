package pilot_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/config"
)

// A command-runner provider, dispatched once.
func ExampleDispatcher_Dispatch() {
	reg, err := pilot.NewRegistry(pilot.Provider{
		Name:   "echo",
		Runner: "command",
		Argv:   []string{"/bin/sh", "-c", `echo "done: $(cat "$1")"`, "sh", "{task_file}"},
	})
	if err != nil {
		panic(err)
	}
	runs, _ := os.MkdirTemp("", "pilot-example-")
	defer os.RemoveAll(runs)
	d := &pilot.Dispatcher{Providers: reg, RunDir: runs}
	d.OnLine = func(_ string, l pilot.Line) { fmt.Printf("%s: %s\n", l.Stream, l.Data) }

	v, err := d.Dispatch(context.Background(), pilot.Task{
		Provider: "echo",
		Mode:     pilot.ModeExplore,
		Prompt:   "list the packages",
		Workdir:  os.TempDir(),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Verdict, *v.ExitCode, v.Verdict.Success())
	// Output:
	// stdout: done: list the packages
	// completed 0 true
}

// A provider whose credential is missing is refused before anything runs.
func ExampleCredentialError() {
	reg, _ := pilot.NewRegistry(pilot.Provider{
		Name:          "glm",
		Runner:        "command",
		Argv:          []string{"glm-agent", "{task_file}"},
		CredentialEnv: "GLM_API_KEY",
	})
	d := &pilot.Dispatcher{
		Providers:   reg,
		Credentials: config.EnvCredentials{LookupEnv: func(string) (string, bool) { return "", false }},
	}
	_, err := d.Dispatch(context.Background(), pilot.Task{Provider: "glm", Mode: pilot.ModeCode, Prompt: "x"})
	var missing *pilot.CredentialError
	fmt.Println(errors.As(err, &missing), missing.Env)
	fmt.Println(err)
	// Output:
	// true GLM_API_KEY
	// pilot: credential missing for glm; set GLM_API_KEY in the environment, or configure its credential source
}

// Providers come from a JSON file; unknown fields are rejected.
func ExampleParseProviders() {
	_, err := config.ParseProviders(strings.NewReader(
		`{"providers": {"glm": {"runner": "command", "argv": ["glm", "{task_file}"], "modle": "x"}}}`),
		"providers.json")
	fmt.Println(err)
	// Output:
	// pilot: providers file providers.json: provider "glm": unknown field "modle": remove it or check its spelling (known: runner, argv, model, credential_env, env, binary, args, base_url, isolated, memory_limit, max_parallel, sandbox, sandbox_allow, sandbox_write, sandbox_connect)
}
