// Package serve is `pilot serve`: a read-only web page over a run
// directory, built on the standard library. It lists the runs, shows a run
// with its evidence in place and its log live, and draws a fanout's or a
// graph's timeline as SVG. Files are found by run id (or group id) in the
// run directory's listing, never by a path taken from a request.
package serve

import (
	"crypto/subtle"
	"embed"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Config is a server's configuration. The zero value serves the default
// run directory to loopback clients.
type Config struct {
	// RunDir is the run directory; "" means pilot.DefaultRunDir().
	RunDir string
	// StateDirs are schedule state directories (schedule.json) shown on
	// the runs page.
	StateDirs []string
	// Token, when set, is what every request must carry: as ?token= once
	// (it then gets a cookie), or the cookie. Empty means none, and only
	// requests naming a loopback host are served (a guard against DNS
	// rebinding).
	Token string
	// Poll is how often a live page's stream looks at the files; zero
	// means 250ms.
	Poll time.Duration
	// TailBytes is how much of the end of a log a page shows at first;
	// zero means 64 KiB.
	TailBytes int64
}

// cookieName is the token's cookie.
const cookieName = "pilot_serve_token"

// Handler returns the server's handler.
func Handler(cfg Config) http.Handler {
	s := newServer(cfg)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("GET /live", s.indexLive)
	mux.HandleFunc("GET /run/{id}", s.run)
	mux.HandleFunc("GET /run/{id}/live", s.runLive)
	mux.HandleFunc("GET /group/{id}", s.group)
	mux.HandleFunc("GET /group/{id}/live", s.groupLive)
	mux.Handle("GET /assets/", http.FileServerFS(assets))
	return s.guard(mux)
}

// guard refuses what is not a read, checks the token or the loopback
// host, and sets the headers every response carries.
func (s *server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "read-only: GET only", http.StatusMethodNotAllowed)
			return
		}
		if s.cfg.Token == "" {
			if !loopbackHost(r.Host) {
				http.Error(w, "this server answers only to a loopback host name (localhost, 127.0.0.1, [::1])", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(cookieName); err == nil && s.tokenOK(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		if t := q.Get("token"); t != "" && s.tokenOK(t) {
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.cfg.Token, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			// The same page without the token in its address.
			q.Del("token")
			u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			if !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
				u.Path = "/" // never a redirect to another host
			}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
		http.Error(w, "a token is required: open the address pilot serve printed", http.StatusUnauthorized)
	})
}

// tokenOK compares t with the token in constant time.
func (s *server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.cfg.Token)) == 1
}

// loopbackHost reports whether a request's Host names this machine's
// loopback: localhost, 127.0.0.0/8 or ::1, with any port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopback reports whether addr (host:port) binds only loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
