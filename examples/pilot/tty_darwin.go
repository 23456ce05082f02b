package main

import "syscall"

const ioctlGetTermios, ioctlSetTermios = syscall.TIOCGETA, syscall.TIOCSETA
