// Package e2e holds pilot's end-to-end tests: the real agent CLIs (pi,
// codex, Claude Code, opencode, gemini-cli), installed from the pinned
// package.json in this folder, driven through pilot's Dispatcher.
//
// The CLIs live in node_modules here (cd e2e && npm ci). Without them the
// tests skip and say so; PILOT_E2E_REQUIRE=1 turns a missing CLI into a
// failure. NOTES.md records how each CLI runs offline against a base URL
// on 127.0.0.1. PILOT_E2E_DIR runs the tests on CLIs installed elsewhere,
// PILOT_E2E_REPORT writes a JSON line per scenario run, PILOT_E2E_RECORD
// writes each run's output and verdict (scripts/cli-drift and new
// conformance fixtures use them). The package has no non-test code.
package e2e
