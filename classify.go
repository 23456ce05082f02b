package pilot

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot/internal/text"
)

// Failure classes read from what a worker printed (see [ClassifyFailure]) or
// decided by pilot's stall policy. They complete the classes in verdict.go.
const (
	// FailProviderConnection: the worker could not reach the model
	// provider (connection refused, DNS, reset before any response).
	FailProviderConnection FailureClass = "provider-connection"
	// FailProviderStreamDisconnect: the provider's response stream broke
	// off before it completed (SSE dropped, "terminated", "other side
	// closed").
	FailProviderStreamDisconnect FailureClass = "provider-stream-disconnect"
	// FailProviderRateLimit: the provider refused for now (HTTP 429, "rate
	// limit"). [Classification].RetryAfter holds the delay it asked for,
	// when it gave one.
	FailProviderRateLimit FailureClass = "provider-rate-limit"
	// FailProviderQuota: the account's usage or billing allowance is used
	// up ("Quota exceeded", "You've hit your usage limit").
	FailProviderQuota FailureClass = "provider-quota"
	// FailProviderServerError: the provider failed on its side (HTTP 5xx,
	// 529 overloaded, "high demand").
	FailProviderServerError FailureClass = "provider-server-error"
	// FailProviderAuth: the provider refused the credential (HTTP 401 or
	// 403) or there was none ("No API key found", "Missing environment
	// variable").
	FailProviderAuth FailureClass = "provider-auth"
	// FailContextLimit: the conversation no longer fits the model's
	// context window ("prompt is too long", "ran out of room").
	FailContextLimit FailureClass = "context-limit"
	// FailSessionStall: pilot's stall policy ended a worker that stopped
	// making progress. It is a policy timeout, not a provider failure;
	// nothing a worker prints produces it.
	FailSessionStall FailureClass = "session-stall"
)

// Retryable reports whether running the same task again may succeed without
// anyone changing anything first. It is advice for a retry policy, which
// still owns budgets and backoff.
//
// Retryable:
//   - provider-connection, provider-stream-disconnect: the network or the
//     provider's front end was briefly unavailable; the CLIs' own retry
//     loops treat these as transient (pi's retry regex, codex's
//     retry_transport, Claude's api_retry).
//   - provider-rate-limit: it clears by itself; wait RetryAfter (or back
//     off) first.
//   - provider-server-error: 5xx and "overloaded" are the provider's own
//     transient trouble; back off first.
//   - generic-error: nothing says the failure is permanent, and the seed
//     dispatcher retried it.
//   - session-stall: the policy cut a stuck session; a fresh attempt, or a
//     resume of the same session, usually gets through.
//   - timeout, idle-timeout: the worker may only have been slow or stuck
//     once; give it another attempt (perhaps resumed).
//   - incomplete: the worker stopped before its stream said it finished;
//     nothing says why, so another attempt may get through.
//
// Not retryable:
//   - provider-auth: the same credential gets the same refusal.
//   - provider-quota: the allowance stays used up until it resets or is
//     topped up (RetryAfter, when known, says when).
//   - context-limit: resending the same conversation overflows again. It
//     needs compaction, a resume with a smaller context, or a smaller
//     task, not a plain retry.
//   - spawn-failed: the program, workdir or CLI setup is missing or
//     refused to start, and will be missing next time.
//   - cancelled: the caller asked pilot to stop.
//   - process-terminated: something outside pilot killed the worker (the
//     OOM killer, an operator); retrying blindly may be killed the same
//     way, so the caller decides.
//   - memory-limit: the same task is likely to need the same memory; raise
//     the limit or split the task first.
//
// Classes pilot does not know are not retryable.
func (c FailureClass) Retryable() bool {
	switch c {
	case FailProviderConnection, FailProviderStreamDisconnect, FailProviderRateLimit,
		FailProviderServerError, FailGeneric, FailSessionStall, FailTimeout, FailIdleTimeout,
		FailIncomplete:
		return true
	}
	return false
}

// Provider reports whether c is one of the provider-* classes: the model
// provider, not the worker or pilot, failed the run. context-limit is not one
// of them: the provider worked and the conversation was too long.
func (c FailureClass) Provider() bool {
	switch c {
	case FailProviderConnection, FailProviderStreamDisconnect, FailProviderRateLimit,
		FailProviderQuota, FailProviderServerError, FailProviderAuth:
		return true
	}
	return false
}

// A Classification is why a worker failed and the proof: what
// [ClassifyFailure] or a Watcher's Diagnose read in its output, and the failure
// part of a watcher's [Result]. The verdict's failure fields are its JSON
// form.
type Classification struct {
	// Class is the failure class the evidence proves; FailGeneric when
	// nothing more specific was found.
	Class FailureClass
	// Evidence is the line that proves Class, exactly as it appeared in
	// the text (without its line ending), or "". A FailGeneric
	// classification has Evidence only when the line is a recognisable
	// API or CLI error that fits no narrower class (an HTTP 400 from the
	// provider, "Error loading config.toml").
	Evidence string
	// RetryAfter is the delay the provider asked for ("retry-after: 30",
	// "try again in 20s", "resets in 2h"), or 0 when it named none or only
	// a clock time ("resets 3pm").
	RetryAfter time.Duration
	// TransportConfirmed is set when the evidence shows the provider's
	// transport itself failed: connection, stream disconnect, server error
	// or rate limit, each with provider context. The caller must clear it
	// when something else ended the run first (a worker killed by a
	// signal, pilot's own timeout): the line then only explains, it does
	// not decide.
	TransportConfirmed bool
	// Source says where the evidence came from ("<runner>:stderr"):
	// ClassifyFailure leaves it empty; a Watcher's Diagnose may set it, and the
	// Dispatcher sets it when it is empty.
	Source string
	// Note is a runner's own gloss of the evidence, for what the CLI's
	// words leave unsaid ("the socket closed mid-stream"); the verdict
	// gives it apart from the excerpt (failure_evidence_note).
	Note string
}

// classPrecedence is the order in which ClassifyFailure picks among lines
// that prove different classes, strongest first. The non-retryable classes
// come first because one such line decides what a retry would do: a run that
// was refused its key, ran out of quota or overflowed its context fails the
// same way next time, whatever transient noise came with it. Among the
// transient classes, rate-limit comes first because it carries the delay the
// provider asked for, and a retry that ignores it is refused again; then the
// classes follow how far the exchange got, the furthest first, since that
// says the most about the cause: the server answered with an error
// (server-error), the answer started and broke off (stream-disconnect), no
// answer at all (connection). Recognised API errors that fit no class
// (generic-error with evidence) come last.
var classPrecedence = [...]FailureClass{
	FailProviderAuth,
	FailProviderQuota,
	FailContextLimit,
	FailProviderRateLimit,
	FailProviderServerError,
	FailProviderStreamDisconnect,
	FailProviderConnection,
	FailGeneric,
}

func classRank(c FailureClass) int {
	for i, p := range classPrecedence {
		if p == c {
			return i
		}
	}
	return len(classPrecedence)
}

// ClassifyFailure reads free text (a worker's stderr, an error message) and
// returns the failure class it proves with the line that proves it. It
// knows what every model API says, no CLI's own words: a runner that knows
// its CLI's classifies them itself (a [Watcher]'s Diagnose).
//
// Each line of text is read on its own, and proves a provider class only
// with provider context: a provider marker ("API Error", "provider",
// "upstream", "openai", "anthropic", a backend or tunnel next to a model),
// an HTTP error status in an API's error format, or an SSE marker. Weak
// lines, such as a test's "connection refused" or "status code 500" in a
// web test, prove nothing; statuses match only on digit boundaries. Retry
// notices ("retrying in 5s") are never evidence.
//
// Among lines of different classes the strongest wins ([Strongest]); among
// lines of one class, the last. Text with no such line is FailGeneric with
// no evidence. Exit codes and signals are the caller's to judge first.
func ClassifyFailure(text string) Classification {
	return classifyText(text, false, 0)
}

// ClassifyProviderError classifies text known to be a failed model call's
// error (a CLI's error event, the reason in its retry notice), so provider
// context is given: a bare "Connection failed: error sending request" is
// provider-connection here. status is the call's HTTP status when the CLI
// reports it apart from the text, else 0. Text that proves no class is
// FailGeneric with no evidence.
func ClassifyProviderError(text string, status int) Classification {
	return classifyText(text, true, status)
}

// Strongest returns the classification of the strongest class among cs,
// the last of equals: provider-auth, provider-quota, context-limit,
// provider-rate-limit, provider-server-error, provider-stream-disconnect,
// provider-connection, then generic-error. A classification without
// evidence never wins; with none, it is FailGeneric.
func Strongest(cs ...Classification) Classification {
	best := Classification{Class: FailGeneric}
	rank := len(classPrecedence) + 1
	for _, c := range cs {
		if c.Evidence == "" {
			continue
		}
		if r := classRank(c.Class); r <= rank {
			best, rank = c, r
		}
	}
	return best
}

// classifyText is ClassifyFailure; provider says text is a failed model
// call's error, so provider context is given and retry wording does not
// hide the line; status is its HTTP status, when known apart.
func classifyText(text string, provider bool, status int) Classification {
	best := Classification{Class: FailGeneric}
	bestRank := len(classPrecedence)
	found := false
	for rest := text; ; {
		line, tail, more := strings.Cut(rest, "\n")
		line = strings.TrimSuffix(line, "\r")
		if c, ok := classifyLine(line, provider, status); ok {
			if r := classRank(c.Class); r <= bestRank {
				best, bestRank, found = c, r, true
			}
		}
		if !more {
			break
		}
		rest = tail
	}
	if !found {
		return Classification{Class: FailGeneric}
	}
	if best.RetryAfter == 0 {
		switch best.Class {
		case FailProviderRateLimit, FailProviderQuota, FailProviderServerError:
			best.RetryAfter = retryAfterHeader(text)
		}
	}
	return best
}

// retryAfterHeader finds a Retry-After header (or field) anywhere in text,
// for providers that print the headers on a line of their own.
func retryAfterHeader(text string) time.Duration {
	for rest := text; ; {
		line, tail, more := strings.Cut(rest, "\n")
		m := strings.ToLower(line)
		if reRetryAfterField.MatchString(m) {
			if d := retryAfter(m); d > 0 {
				return d
			}
		}
		if !more {
			return 0
		}
		rest = tail
	}
}

// The patterns below run on the matching copy of a line: ANSI escapes
// removed, typographic apostrophes made plain, lower case.
var (
	// Retries in progress: "retrying in 5s", "retrying with backoff",
	// "retrying after 500ms".
	reRetryInProgress = regexp.MustCompile(`\bretrying in\b|\bretrying with backoff\b|\bretrying after \d+\s*ms\b`)

	// Provider markers. backend and tunnel count only next to a model
	// word (reBackendModel): on their own they name the project's own
	// servers as often as the model's.
	reProviderMarker = regexp.MustCompile(`\bapi[ _]?error|\bapi\w*error|\bprovider|\bupstream|\bopenai|\banthropic|\bllm`)
	reBackend        = regexp.MustCompile(`\b(?:backend|tunnel)`)
	reBackendModel   = regexp.MustCompile(`\b(?:model|llm|inference|sse)\b`)
	reSSE            = regexp.MustCompile(`\bsse\b|event-stream`)
	reAPIErrorMarker = regexp.MustCompile(`\bapi[ _]?error\b|\bapi\w*error\b`)

	// HTTP statuses that prove provider context by themselves: an SDK's
	// "<status> <message>" at the start of the line and "API Error: N".
	reStatusLead       = regexp.MustCompile(`^\s*(?:error:\s*)?([45]\d\d)\b(.*)$`)
	reStatusLeadRest   = regexp.MustCompile(`^\s*\{|\b(?:error|rate|limit(?:ed)?|unauthori[sz]ed|forbidden|unavailable|overloaded|invalid|denied|exceeded|quota|too many|too large|too long|timeout|timed out|gateway|not found|bad request|expired|api key|auth\w*|payment required|internal|server|status code|no body|\w+_error)\b`)
	reStatusStrong     = regexp.MustCompile(`\bapi error:?\s*\(?([45]\d\d)\b`)
	reStatusWithMarker = regexp.MustCompile(`status(?:[ _]?code)?"?\s*[:=]?\s*"?([45]\d\d)\b|\bhttp(?:/\d(?:\.\d)?)?\s+([45]\d\d)\b|\(([45]\d\d)\)|"code"\s*:\s*"?([45]\d\d)\b`)

	// The APIs' own error codes and messages.
	reAuthStrong = regexp.MustCompile(`invalid_api_key|invalid x-api-key|authentication_error`)
	// "Invalid API key" and "Failed to authenticate" are common to many
	// APIs and tools: they need provider context.
	reAuthWeak = regexp.MustCompile(`unauthori[sz]ed|forbidden|authenticat|permission_error|oauth token|token (?:has )?expired|api[ _-]?key\W+(?:\w+\W+){0,3}(?:missing|invalid|not valid|not set|not found|expired|incorrect|revoked|required)|(?:missing|invalid|incorrect|no|expired|revoked) api[ _-]?key`)

	reQuotaStrong = regexp.MustCompile(`quota exceeded\. check your plan|exceeded your current quota|insufficient_quota|you've hit your (?:[\w-]+ ){0,3}limit|you have hit your (?:[\w-]+ ){0,3}limit|usage limit (?:has been )?reached|reached your usage limit|credit balance is too low|billing_error|check your plan and billing`)
	reQuotaWeak   = regexp.MustCompile(`\bquota\b|\bbilling\b|out of credits|payment required|exhausted your`)
	reDiskQuota   = regexp.MustCompile(`disk quota`)
	rePerMinute   = regexp.MustCompile(`per (?:minute|second|min|sec)\b|\brpm\b|\btpm\b|requests per`)

	// The APIs' context-overflow messages (the specific ones of pi's
	// isContextOverflow list, packages/ai/src/utils/overflow.ts).
	reContextStrong = regexp.MustCompile(`prompt is too long|input is too long for requested model|exceeds the context window|input token count.*exceeds the maximum|maximum prompt length is \d+|reduce the length of the messages|maximum context length is \d+ tokens|exceeds the available context size|greater than the context length|context window exceeds limit|exceeded model token limit|too large for model with \d+ maximum context length|model_context_window_exceeded|context[_ ]length[_ ]exceeded|exceed context limit`)
	// pi's vaguer patterns, which need provider context here.
	reContextWeak = regexp.MustCompile(`exceeds the limit of \d+|too many tokens|token limit exceeded`)
	// pi's Cerebras rule: a bodyless 400 or 413.
	reContextNoBody = regexp.MustCompile(`^\s*4(?:00|13)\s*(?:status code)?\s*\(no body\)`)

	reRateStrong = regexp.MustCompile(`rate_limit_error|rate_limit_exceeded`)
	reRateWeak   = regexp.MustCompile(`rate.?limit|too many requests|resource_exhausted|throttl`)

	reServerStrong = regexp.MustCompile(`currently experiencing high demand|overloaded_error`)
	reServerWeak   = regexp.MustCompile(`overloaded|internal.?server.?error|internal.?error|server.?error|service.?unavailable|bad gateway|gateway time-?out|temporarily unavailable|high demand`)

	reStreamStrong = regexp.MustCompile(`connection closed mid-response|connection to the api was lost`)
	reStreamWeak   = regexp.MustCompile(`other side closed|mid-?response|mid-?stream|premature close|stream (?:was )?(?:disconnected|closed|ended|interrupted|terminated|dropped|error|reset|aborted)|(?:disconnected|closed|ended|terminated|dropped|interrupted) (?:the )?stream|unexpected end of (?:stream|data)|incomplete (?:chunked|response|stream)|before \[?done\]?|crashed before stream`)
	// Causes that mean the request never reached the provider: a "stream
	// disconnected" around one of them is a connection failure.
	reNeverConnected = regexp.MustCompile(`error sending request|connection refused|econnrefused|enotfound|no such host|dial tcp|failed to connect|connect error|tcp connect|could not resolve|name resolution|getaddrinfo|dns error`)

	reConnectionStrong = regexp.MustCompile(`unable to connect to api|apiconnection(?:timeout)?error`)
	reConnectionWeak   = regexp.MustCompile(`connection refused|connectionrefused|econnrefused|enotfound|econnreset|etimedout|econnaborted|ehostunreach|enetunreach|connection reset|connection error|connection failed|connect error|failed to connect|unable to connect|could not connect|couldn't connect|cannot connect|dial tcp|no such host|name resolution|getaddrinfo|name or service not known|network is unreachable|host is unreachable|error sending request|fetch failed|socket hang up|timed out|connect timeout|tls handshake|reset before headers|upstream.?connect`)
)

// markerWords holds a word of every provider marker, strongWords a word of
// every alternative of the patterns that need no provider context (the
// *Strong patterns and reContextNoBody; reAPIErrorMarker is gated on "api"
// and "error" both). Most lines hold none of them and are decided by these
// substring searches alone; a pattern added above needs its word here
// (TestStrongWordsCoverPatterns checks).
var (
	markerWords = []string{"api", "provider", "upstream", "openai", "anthropic", "llm", "backend", "tunnel"}
	strongWords = []string{
		"api key", "api_key", "x-api-key", "to api", "apiconnection", "authentication_error",
		"quota", "hit your", "usage limit", "credit balance", "billing",
		"too long", "context window", "context_window", "context length", "context_length",
		"context size", "context limit",
		"input token count", "maximum prompt length", "reduce the length",
		"token limit", "too large for model", "no body",
		"rate_limit", "high demand", "overloaded", "mid-response", "api was lost",
	}
	retryWords = []string{"retrying in", "retrying with backoff", "retrying after"}
)

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// retryInProgress reports whether m (a matching copy) is a retry notice.
func retryInProgress(m string) bool {
	return containsAny(m, retryWords) && reRetryInProgress.MatchString(m)
}

func classifyLine(line string, provider bool, status int) (Classification, bool) {
	if strings.TrimSpace(line) == "" {
		return Classification{}, false
	}
	m := text.Matching(line)
	if !provider && retryInProgress(m) {
		return Classification{}, false
	}
	class, ok := lineClass(m, provider, status)
	if !ok {
		return Classification{}, false
	}
	c := Classification{Class: class, Evidence: line, RetryAfter: retryAfter(m)}
	switch class {
	case FailProviderConnection, FailProviderStreamDisconnect, FailProviderServerError, FailProviderRateLimit:
		c.TransportConfirmed = true
	}
	return c, true
}

// lineClass decides the class one line proves, if any; m is its matching
// copy. The checks run in the order of classPrecedence, so a line that
// names two causes ("stream disconnected: rate limit") gets the stronger
// one. provider says the line is known to be about the model call, as a
// provider marker in it would; known is the call's HTTP status, when given
// apart from the line.
func lineClass(m string, provider bool, known int) (FailureClass, bool) {
	marker := provider || containsAny(m, markerWords) && (reProviderMarker.MatchString(m) ||
		(reBackend.MatchString(m) && reBackendModel.MatchString(m)))
	status := known
	if status == 0 && strings.ContainsAny(m, "45") {
		status = httpStatus(m, marker, provider)
	}
	ctx := marker || status != 0
	sse := (strings.Contains(m, "sse") || strings.Contains(m, "event-stream")) && reSSE.MatchString(m)
	// reAPIErrorMarker needs "api" and "error" both.
	if !ctx && !sse && !containsAny(m, strongWords) &&
		!(strings.Contains(m, "api") && strings.Contains(m, "error")) {
		return "", false
	}

	switch {
	case reAuthStrong.MatchString(m), status == 401, status == 403,
		ctx && reAuthWeak.MatchString(m):
		return FailProviderAuth, true

	// A 429 with only loose quota words ("check quota") is a rate limit;
	// the strong phrases (insufficient_quota, "You've hit your limit")
	// decide quota whatever the status.
	case reQuotaStrong.MatchString(m), status == 402,
		ctx && status != 429 && reQuotaWeak.MatchString(m) && !reDiskQuota.MatchString(m):
		if rePerMinute.MatchString(m) && !reQuotaStrong.MatchString(m) {
			return FailProviderRateLimit, true
		}
		return FailProviderQuota, true

	case reContextStrong.MatchString(m), reContextNoBody.MatchString(m), status == 413,
		ctx && reContextWeak.MatchString(m):
		return FailContextLimit, true

	case status == 429, reRateStrong.MatchString(m), ctx && reRateWeak.MatchString(m):
		return FailProviderRateLimit, true

	case status >= 500, reServerStrong.MatchString(m), ctx && reServerWeak.MatchString(m):
		return FailProviderServerError, true

	case reStreamStrong.MatchString(m), (ctx || sse) && reStreamWeak.MatchString(m):
		if reNeverConnected.MatchString(m) {
			return FailProviderConnection, true
		}
		return FailProviderStreamDisconnect, true

	case reConnectionStrong.MatchString(m), ctx && reConnectionWeak.MatchString(m):
		return FailProviderConnection, true

	case status != 0, reAPIErrorMarker.MatchString(m):
		return FailGeneric, true
	}
	return "", false
}

// httpStatus returns the HTTP error status (400-599) a line reports in a
// provider's error format, or 0. The generic forms ("status 429", "HTTP 503",
// "(401)", "code": 500) count only on a line with a provider marker; a
// leading status needs an error word after it, unless provider says the
// line is a model call's error.
func httpStatus(m string, marker, provider bool) int {
	if g := reStatusLead.FindStringSubmatch(m); g != nil && (provider || reStatusLeadRest.MatchString(g[2])) {
		return atoiStatus(g[1])
	}
	if g := reStatusStrong.FindStringSubmatch(m); g != nil {
		return atoiStatus(firstGroup(g))
	}
	if marker {
		if g := reStatusWithMarker.FindStringSubmatch(m); g != nil {
			return atoiStatus(firstGroup(g))
		}
	}
	return 0
}

func firstGroup(g []string) string {
	for _, s := range g[1:] {
		if s != "" {
			return s
		}
	}
	return ""
}

func atoiStatus(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

// Delay hints. The _ms forms count bare numbers in milliseconds, the others
// in seconds.
var (
	reRetryAfterField = regexp.MustCompile(`retry[-_ ]?after(?:[-_]ms)?"?\s*[:=]|retry_?delay(?:_ms)?"?\s*[:=]`)
	reRetryHint       = regexp.MustCompile(`(retry[-_]after[-_]ms|retry_delay_ms|retry[-_ ]?after|retry_?delay|try again in|retry in|resets? in)"?\s*[:=]?\s*"?`)
)

// maxRetryAfter bounds a parsed delay: anything longer is not a retry hint
// pilot could act on, and the bound keeps the arithmetic from overflowing.
const maxRetryAfter = 366 * 24 * time.Hour

// retryAfter parses the first delay hint in m (a lower-cased line).
func retryAfter(m string) time.Duration {
	for _, loc := range reRetryHint.FindAllStringSubmatchIndex(m, -1) {
		hint := m[loc[2]:loc[3]]
		unit := time.Second
		if strings.HasSuffix(hint, "ms") {
			unit = time.Millisecond
		}
		if d := parseDelay(m[loc[1]:], unit); d > 0 {
			return d
		}
	}
	return 0
}

// parseDelay reads a delay at the start of s: "30", "1.5s", "6m0s", "500ms",
// "2 minutes", "3 days 2 hours and 5 minutes". A bare number is in unit.
func parseDelay(s string, unit time.Duration) time.Duration {
	var total float64 // nanoseconds
	parts := 0
	i := 0
	for {
		j := i
		for j < len(s) && (s[j] >= '0' && s[j] <= '9') {
			j++
		}
		if j == i {
			break
		}
		if j+1 < len(s) && s[j] == '.' && s[j+1] >= '0' && s[j+1] <= '9' {
			j++
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
		}
		n, err := strconv.ParseFloat(s[i:j], 64)
		if err != nil {
			break
		}
		k := j
		for k < len(s) && s[k] == ' ' {
			k++
		}
		w := k
		for w < len(s) && s[w] >= 'a' && s[w] <= 'z' {
			w++
		}
		word := s[k:w]
		u, known := delayUnits[word]
		switch {
		case word == "" && parts == 0:
			u, w = unit, j
		case !known:
			return clampDelay(total)
		}
		total += n * float64(u)
		parts++
		if total > float64(maxRetryAfter) {
			return maxRetryAfter
		}
		// Separators between parts: spaces, commas, "and".
		i = w
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if strings.HasPrefix(s[i:], "and ") {
			i += len("and ")
		}
		if word == "" {
			break
		}
	}
	return clampDelay(total)
}

func clampDelay(ns float64) time.Duration {
	switch {
	case ns <= 0 || math.IsNaN(ns):
		return 0
	case ns > float64(maxRetryAfter):
		return maxRetryAfter
	}
	return time.Duration(ns).Round(time.Millisecond)
}

var delayUnits = map[string]time.Duration{
	"ms": time.Millisecond, "msec": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// signalFromExitCode returns the signal a 128+N exit code (129 to 159)
// stands for: the shell's and most CLIs' way of saying "ended by signal N"
// (143 is SIGTERM, 137 SIGKILL, 130 SIGINT). The signal is inferred: a
// program may exit with such a code on its own. gemini-cli does: it exits
// with an API error's HTTP status, whose low 8 bits put 400 to 415 at 144
// to 159; the gemini runner's watcher, which has seen the error event,
// judges those itself.
func signalFromExitCode(code int) (sig syscall.Signal, ok bool) {
	if code < 129 || code > 159 {
		return 0, false
	}
	return syscall.Signal(code - 128), true
}
