package pilot

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
	"sync"

	"github.com/pilotworkers/pilot/internal/procfs"
)

// Provenance says which program dispatched a run, so a record can be traced
// to the code that made it. It is the Go form of the seed dispatcher's
// source check: a binary replaced on disk while it runs (a rebuild, an
// upgrade) keeps running the old code, and SourceMatchesLoaded turns false.
type Provenance struct {
	// Pid is the dispatching process, and Start its start time in clock
	// ticks after boot (Linux; 0 elsewhere). With the kernel's BootID, the
	// PidNamespace ("pid:[N]") and the Host they name that process beyond
	// doubt: a reconcile never takes a reused pid, or a pid of another
	// namespace or host, for the run's pilot, nor a live pilot for a dead
	// one after the wall clock stepped.
	Pid          int    `json:"dispatcher_pid"`
	Start        uint64 `json:"dispatcher_start_ticks,omitempty"`
	BootID       string `json:"dispatcher_boot_id,omitempty"`
	PidNamespace string `json:"dispatcher_pid_namespace,omitempty"`
	Host         string `json:"dispatcher_host,omitempty"`
	// SourcePath is the executable's path; SourceSHA256 the sha256 of the
	// executable that is running (read through /proc/self/exe on Linux,
	// which is the loaded file even when the path now holds another;
	// elsewhere, the file at SourcePath on the first dispatch);
	// CurrentSHA256 the sha256 of the file at SourcePath now.
	SourcePath          string `json:"dispatcher_source_path"`
	SourceSHA256        string `json:"dispatcher_source_sha256"`
	CurrentSHA256       string `json:"dispatcher_source_current_sha256"`
	SourceMatchesLoaded bool   `json:"dispatcher_source_matches_loaded"`
	// Module and Version are the main module's path and version from its
	// build information, PilotVersion pilot's own module version, and
	// VCSRevision/VCSModified the commit the binary was built from.
	Module       string `json:"dispatcher_module,omitempty"`
	Version      string `json:"dispatcher_version,omitempty"`
	PilotVersion string `json:"pilot_version,omitempty"`
	VCSRevision  string `json:"dispatcher_vcs_revision,omitempty"`
	VCSModified  bool   `json:"dispatcher_vcs_modified,omitempty"`
}

// loaded is what does not change while the process runs: computed once,
// on the first dispatch.
var loaded struct {
	once sync.Once
	p    Provenance
	st   fileID // the running executable's identity
}

// fileID identifies a file's content cheaply: when it is unchanged, the
// sha256 need not be computed again.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

func statID(path string) (fileID, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	dev, ino := devIno(fi)
	return fileID{dev, ino, fi.Size(), fi.ModTime().UnixNano()}, true
}

func sha256File(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// currentProvenance returns the Provenance of this process now. The first
// call hashes the running executable; later calls only stat the file at
// its path, and hash it again only if it changed.
func currentProvenance() Provenance {
	loaded.once.Do(func() {
		p := &loaded.p
		p.Pid = os.Getpid()
		p.Start, _ = procfs.StartTime(p.Pid)
		id := procfs.Self()
		p.BootID, p.PidNamespace, p.Host = id.BootID, id.PidNamespace, id.Host
		p.SourcePath, _ = os.Executable()
		exe := loadedExecutable(p.SourcePath)
		p.SourceSHA256 = sha256File(exe)
		loaded.st, _ = statID(exe)
		if bi, ok := debug.ReadBuildInfo(); ok {
			p.Module, p.Version = bi.Main.Path, bi.Main.Version
			if bi.Main.Path == pilotModule {
				p.PilotVersion = bi.Main.Version
			}
			for _, d := range bi.Deps {
				if d.Path == pilotModule {
					p.PilotVersion = d.Version
				}
			}
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					p.VCSRevision = s.Value
				case "vcs.modified":
					p.VCSModified = s.Value == "true"
				}
			}
		}
	})
	p := loaded.p
	p.CurrentSHA256 = p.SourceSHA256
	if id, ok := statID(p.SourcePath); !ok {
		p.CurrentSHA256 = "" // the file is gone
	} else if id != loaded.st {
		p.CurrentSHA256 = sha256File(p.SourcePath)
	}
	p.SourceMatchesLoaded = p.SourceSHA256 != "" && p.CurrentSHA256 == p.SourceSHA256
	return p
}

const pilotModule = "github.com/pilotworkers/pilot"
