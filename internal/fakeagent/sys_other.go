//go:build unix && !linux

package fakeagent

func junkFDs() string { return "junkfds unsupported" }
