module github.com/pilotworkers/pilot/contrib/temporal/devserver

go 1.26.8

require go.temporal.io/server v1.32.1 // indirect
