module github.com/pilotworkers/pilot

go 1.25

require (
	github.com/google/go-cmp v0.7.0
	golang.org/x/sync v0.19.0
)

ignore ./e2e/node_modules
