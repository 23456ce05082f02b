package rundir

var ClockMargin = clockMargin
var EnvRunID = envRunID
var IsTemp = isTemp
