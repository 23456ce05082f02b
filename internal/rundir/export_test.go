package rundir

import "github.com/pilotworkers/pilot/internal/procfs"

var ClockMargin = procfs.ClockMargin
var EnvRunID = envRunID
var IsTemp = isTemp
