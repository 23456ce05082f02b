// Package landlock describes a Linux Landlock ruleset and restricts the
// calling thread with it.
package landlock

// Filesystem access rights (LANDLOCK_ACCESS_FS_*), as the kernel numbers
// them; the comment says which ABI brought a right.
const (
	FSExecute    uint64 = 1 << 0
	FSWriteFile  uint64 = 1 << 1
	FSReadFile   uint64 = 1 << 2
	FSReadDir    uint64 = 1 << 3
	FSRemoveDir  uint64 = 1 << 4
	FSRemoveFile uint64 = 1 << 5
	FSMakeChar   uint64 = 1 << 6
	FSMakeDir    uint64 = 1 << 7
	FSMakeReg    uint64 = 1 << 8
	FSMakeSock   uint64 = 1 << 9
	FSMakeFifo   uint64 = 1 << 10
	FSMakeBlock  uint64 = 1 << 11
	FSMakeSym    uint64 = 1 << 12
	FSRefer      uint64 = 1 << 13 // ABI 2
	FSTruncate   uint64 = 1 << 14 // ABI 3
	FSIoctlDev   uint64 = 1 << 15 // ABI 5
)

// Network access rights (LANDLOCK_ACCESS_NET_*, ABI 4) and scopes
// (LANDLOCK_SCOPE_*, ABI 6).
const (
	NetBindTCP    uint64 = 1 << 0
	NetConnectTCP uint64 = 1 << 1

	ScopeAbstractUnixSocket uint64 = 1 << 0
	ScopeSignal             uint64 = 1 << 1
)

// FSFile is the rights that a rule on a file (not a directory) may carry.
const FSFile = FSExecute | FSWriteFile | FSReadFile | FSTruncate | FSIoctlDev

// FSRead is the rights that read or run what exists; FSWrite is every other
// filesystem right (write, truncate, create, remove, rename or link).
const (
	FSRead  = FSExecute | FSReadFile | FSReadDir | FSIoctlDev
	FSWrite = FSWriteFile | FSRemoveDir | FSRemoveFile | FSMakeChar | FSMakeDir | FSMakeReg |
		FSMakeSock | FSMakeFifo | FSMakeBlock | FSMakeSym | FSRefer | FSTruncate
)

// FSRights returns every filesystem right Landlock ABI abi knows; 0 for an
// ABI below 1.
func FSRights(abi int) uint64 {
	var r uint64
	switch {
	case abi >= 5:
		r = FSIoctlDev<<1 - 1
	case abi >= 3:
		r = FSTruncate<<1 - 1
	case abi == 2:
		r = FSRefer<<1 - 1
	case abi == 1:
		r = FSMakeSym<<1 - 1
	}
	return r
}

// A Ruleset is what a worker may do: every right in FS, Net and Scope is
// denied except where a rule grants it.
type Ruleset struct {
	FS    uint64 `json:"fs,omitempty"`    // handled filesystem rights
	Net   uint64 `json:"net,omitempty"`   // handled network rights
	Scope uint64 `json:"scope,omitempty"` // scopes: signals, abstract sockets

	Paths []PathRule `json:"paths,omitempty"`
	// Ports may be connected to over TCP, on any host (NetConnectTCP).
	Ports []uint16 `json:"ports,omitempty"`
}

// A PathRule grants Access beneath Path (or on it, for a file). Path is
// bytes so that a name that is not UTF-8 crosses JSON unchanged.
type PathRule struct {
	Path   []byte `json:"p"`
	Access uint64 `json:"a"`
	// File marks a rule on a file, which carries only FSFile rights.
	File bool `json:"f,omitempty"`
}
