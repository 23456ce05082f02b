package main

import "syscall"

const ioctlGetTermios, ioctlSetTermios = syscall.TCGETS, syscall.TCSETS
