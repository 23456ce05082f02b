package pilot

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
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

// A Classification is what [ClassifyFailure] read in a worker's diagnostics.
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

// ClassifyFailure reads free text (a worker's stderr, an error message, the
// text [ExtractDiagnostic] pulled from a JSON event) and returns the failure
// class it proves with the line that proves it.
//
// The text is split into lines on "\n", each without a trailing "\r". Each
// line is read on its own. A line proves a provider class only with provider
// context: a provider marker ("API Error", "APIError", "provider",
// "upstream", "openai", "anthropic", a backend or tunnel named together with
// a model), an HTTP error status in a provider's error format, an SSE marker,
// or one of the exact phrases the agent CLIs print ("stream disconnected
// before completion", "No API key found for", pi's bare "terminated"). Weak
// lines, such as a test's "connection refused", a bare "dial tcp …: connect:
// connection refused", or "status code 500" in a web test, prove nothing.
// HTTP statuses match only on digit boundaries ("1429 files" and "port 5000"
// hold no status). Retry notices (codex "Reconnecting... 2/5 (…)", Claude
// api_retry, pi auto_retry_start, gemini's "Retrying with backoff..." and
// "Retrying after 5000ms...") are retries in progress and never evidence.
//
// When several lines prove a class, the strongest class wins in this order:
// provider-auth, provider-quota, context-limit, provider-rate-limit,
// provider-server-error, provider-stream-disconnect, provider-connection,
// then a recognised API error as generic-error; among lines of the winning
// class the last one wins, being the nearest to the end of the run. Text
// with no such line is FailGeneric with no evidence.
//
// ClassifyFailure knows nothing of exit codes or signals: the caller must
// judge pilot's own terminations, signals and exit 143 first (a worker
// killed by SIGTERM is process-terminated whatever its stderr says).
func ClassifyFailure(text string) Classification {
	return classifyText(text, false)
}

// classifyRetried classifies text, the reason a worker gives for retrying
// its model call (the inside of a retry notice). The retry itself is the
// provider context: a bare "Connection failed: error sending request" is
// provider-connection there. Text that proves no class is generic-error.
func classifyRetried(text string) Classification {
	return classifyText(text, true)
}

// classifyText is ClassifyFailure; retried says text is a failed model
// call's reason from a retry notice, so a provider context is given and
// the retry wording does not hide the line.
func classifyText(text string, retried bool) Classification {
	best := Classification{Class: FailGeneric}
	bestRank := len(classPrecedence)
	found := false
	for rest := text; ; {
		line, tail, more := strings.Cut(rest, "\n")
		line = strings.TrimSuffix(line, "\r")
		if c, ok := classifyLine(line, retried); ok {
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
	// Retries in progress: codex's reconnect notices, Claude's api_retry
	// event and pi's auto_retry_start event (when raw JSON is classified),
	// and "retrying in N" notices.
	reRetryInProgress = regexp.MustCompile(`reconnecting\.\.\.\s*(?:\d+\s*/\s*\d+|waiting for network)|"subtype"\s*:\s*"api_retry"|"type"\s*:\s*"auto_retry_start"|\bretrying in\b|\bretrying with backoff\b|\bretrying after \d+\s*ms\b`)

	// Provider markers. backend and tunnel count only next to a model
	// word (reBackendModel): on their own they name the project's own
	// servers as often as the model's.
	reProviderMarker = regexp.MustCompile(`\bapi[ _]?error|\bapi\w*error|\bprovider|\bupstream|\bopenai|\banthropic|\bllm`)
	reBackend        = regexp.MustCompile(`\b(?:backend|tunnel)`)
	reBackendModel   = regexp.MustCompile(`\b(?:model|llm|inference|sse)\b`)
	reSSE            = regexp.MustCompile(`\bsse\b|event-stream`)
	reAPIErrorMarker = regexp.MustCompile(`\bapi[ _]?error\b|\bapi\w*error\b`)

	// HTTP statuses that prove provider context by themselves: pi's
	// "<status> <message>" at the start of the line, codex's "unexpected
	// status N" at the start of the line and "exceeded retry limit, last
	// status: N", Claude's api_error_status and "API Error: N".
	reStatusLead       = regexp.MustCompile(`^\s*(?:error:\s*)?([45]\d\d)\b(.*)$`)
	reStatusLeadRest   = regexp.MustCompile(`^\s*\{|\b(?:error|rate|limit(?:ed)?|unauthori[sz]ed|forbidden|unavailable|overloaded|invalid|denied|exceeded|quota|too many|too large|too long|timeout|timed out|gateway|not found|bad request|expired|api key|auth\w*|payment required|internal|server|status code|no body|\w+_error)\b`)
	reStatusCodexLead  = regexp.MustCompile(`^\s*(?:error:\s*)?unexpected status ([45]\d\d)\b`)
	reStatusStrong     = regexp.MustCompile(`exceeded retry limit, last status:?\s*([45]\d\d)\b|api_error_status"?\s*[:=]?\s*"?([45]\d\d)\b|\bapi error:?\s*\(?([45]\d\d)\b`)
	reStatusWithMarker = regexp.MustCompile(`status(?:[ _]?code)?"?\s*[:=]?\s*"?([45]\d\d)\b|\bhttp(?:/\d(?:\.\d)?)?\s+([45]\d\d)\b|\(([45]\d\d)\)|"code"\s*:\s*"?([45]\d\d)\b`)

	// pi's "No API key found for <provider>" and `Authentication failed
	// for "<provider>"` (git says 'url', psql "for user"), codex's missing
	// env_key (a variable named like a key or token: a missing
	// DATABASE_URL is no provider's), Claude's /login hint and error
	// category, the providers' own error codes.
	reAuthStrong = regexp.MustCompile("no api key found for|invalid_api_key|invalid x-api-key|authentication failed for \"|credentials may have expired|please run /login|authentication_error|authentication_failed|providerautherror|missing environment variable: `[^`]*(?:key|token)[^`]*`")
	// "Invalid API key" and "Failed to authenticate" are common to many
	// APIs and tools: they need provider context.
	reAuthWeak = regexp.MustCompile(`unauthori[sz]ed|forbidden|authenticat|permission_error|oauth token|token (?:has )?expired|api[ _-]?key\W+(?:\w+\W+){0,3}(?:missing|invalid|not valid|not set|not found|expired|incorrect|revoked|required)|(?:missing|invalid|incorrect|no|expired|revoked) api[ _-]?key`)

	reQuotaStrong = regexp.MustCompile(`quota exceeded\. check your plan|exceeded your current quota|insufficient_quota|you've hit your (?:[\w-]+ ){0,3}limit|you have hit your (?:[\w-]+ ){0,3}limit|usage limit (?:has been )?reached|reached your usage limit|credit balance is too low|billing_error|check your plan and billing`)
	reQuotaWeak   = regexp.MustCompile(`\bquota\b|\bbilling\b|out of credits|payment required|exhausted your`)
	reDiskQuota   = regexp.MustCompile(`disk quota`)
	rePerMinute   = regexp.MustCompile(`per (?:minute|second|min|sec)\b|\brpm\b|\btpm\b|requests per`)

	// pi's isContextOverflow patterns (packages/ai/src/utils/overflow.ts),
	// the specific ones, plus codex's, opencode's and Claude's own.
	reContextStrong = regexp.MustCompile(`prompt is too long|input is too long for requested model|exceeds the context window|input token count.*exceeds the maximum|maximum prompt length is \d+|reduce the length of the messages|maximum context length is \d+ tokens|exceeds the available context size|greater than the context length|context window exceeds limit|exceeded model token limit|too large for model with \d+ maximum context length|model_context_window_exceeded|context[_ ]length[_ ]exceeded|ran out of room in the model's context window|contextoverflowerror|exceed context limit|terminal_reason: blocking_limit`)
	// pi's vaguer patterns, which need provider context here.
	reContextWeak = regexp.MustCompile(`exceeds the limit of \d+|too many tokens|token limit exceeded`)
	// pi's Cerebras rule: a bodyless 400 or 413.
	reContextNoBody = regexp.MustCompile(`^\s*4(?:00|13)\s*(?:status code)?\s*\(no body\)`)

	reRateStrong = regexp.MustCompile(`rate_limit_error|rate_limit_exceeded`)
	reRateWeak   = regexp.MustCompile(`rate.?limit|too many requests|resource_exhausted|throttl`)

	reServerStrong = regexp.MustCompile(`currently experiencing high demand|overloaded_error`)
	reServerWeak   = regexp.MustCompile(`overloaded|internal.?server.?error|internal.?error|server.?error|service.?unavailable|bad gateway|gateway time-?out|temporarily unavailable|high demand`)

	reStreamStrong = regexp.MustCompile(`stream disconnected before completion|connection closed mid-response|connection to the api was lost|request ended without sending any chunks|error while reading the server response`)
	reStreamWeak   = regexp.MustCompile(`other side closed|mid-?response|mid-?stream|premature close|stream (?:was )?(?:disconnected|closed|ended|interrupted|terminated|dropped|error|reset|aborted)|(?:disconnected|closed|ended|terminated|dropped|interrupted) (?:the )?stream|unexpected end of (?:stream|data)|incomplete (?:chunked|response|stream)|before \[?done\]?|crashed before stream`)
	// Causes that mean the request never reached the provider: a "stream
	// disconnected" around one of them is a connection failure.
	reNeverConnected = regexp.MustCompile(`error sending request|connection refused|econnrefused|enotfound|no such host|dial tcp|failed to connect|connect error|tcp connect|could not resolve|name resolution|getaddrinfo|dns error`)

	reConnectionStrong = regexp.MustCompile(`unable to connect to api|apiconnection(?:timeout)?error`)
	reConnectionCodex  = regexp.MustCompile(`^\s*(?:ERROR:\s*)?Connection failed: `)
	reConnectionWeak   = regexp.MustCompile(`connection refused|connectionrefused|econnrefused|enotfound|econnreset|etimedout|econnaborted|ehostunreach|enetunreach|connection reset|connection error|connection failed|connect error|failed to connect|unable to connect|could not connect|couldn't connect|cannot connect|dial tcp|no such host|name resolution|getaddrinfo|name or service not known|network is unreachable|host is unreachable|error sending request|fetch failed|socket hang up|timed out|connect timeout|tls handshake|reset before headers|upstream.?connect`)

	// Fatal texts of the agent CLIs that fit no class: generic-error, with
	// the line as evidence.
	reCLIFatal = regexp.MustCompile(`error loading config\.toml|wire_api = "chat" is no longer supported|no model selected|no models available|\[claude-code:unrecognized_model\]|not inside a trusted directory|requires --verbose|providermodelnotfounderror|messageoutputlengtherror|contentfiltererror|structuredoutputerror|messageabortederror`)

	reANSI = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)
)

// markerWords holds a word of every provider marker, strongWords a word of
// every alternative of the patterns that need no provider context (the
// *Strong patterns, reContextNoBody, reCLIFatal and reConnectionCodex;
// reAPIErrorMarker is gated on "api" and "error" both). Most lines hold
// none of them and are decided by these substring searches without running
// a regular expression; a pattern added above needs its word here.
var (
	markerWords = []string{"api", "provider", "upstream", "openai", "anthropic", "llm", "backend", "tunnel"}
	strongWords = []string{
		"api key", "api_key", "x-api-key", "to api", "apiconnection",
		"authent", "credentials", "/login", "providerauth", "missing environment variable",
		"quota", "hit your", "usage limit", "credit balance", "billing",
		"too long", "context window", "context_window", "context length", "context_length",
		"context size", "context limit", "contextoverflow",
		"input token count", "maximum prompt length", "reduce the length",
		"token limit", "too large for model", "blocking_limit", "ran out of room", "no body",
		"rate_limit", "high demand", "overloaded",
		"stream disconnected", "mid-response", "chunks", "server response", "connection failed: ",
		"config.toml", "wire_api", "no model", "claude-code:", "trusted directory", "--verbose",
		"providermodelnotfound", "messageoutputlength", "contentfilter", "structuredoutput", "messageaborted",
	}
	retryWords = []string{"reconnecting", "api_retry", "auto_retry_start", "retrying in", "retrying with backoff", "retrying after"}
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

// Lines that are exactly one of pi's errorMessage texts, printed alone on
// stderr in text mode: the OpenAI and Anthropic SDKs' connection errors and
// undici's messages. "terminated" counts only in lower case: a shell's
// "Terminated" reports a signal, not a dropped stream.
var piExactLines = map[string]FailureClass{
	"connection error.":  FailProviderConnection,
	"request timed out.": FailProviderConnection,
	"fetch failed":       FailProviderConnection,
	"other side closed":  FailProviderStreamDisconnect,
}

func classifyLine(line string, retried bool) (Classification, bool) {
	if strings.TrimSpace(line) == "" {
		return Classification{}, false
	}
	plain := line
	if strings.IndexByte(plain, 0x1b) >= 0 {
		plain = reANSI.ReplaceAllString(plain, "")
	}
	m := strings.ToLower(strings.ReplaceAll(plain, "\u2019", "'"))
	if !retried && retryInProgress(m) {
		return Classification{}, false
	}
	class, ok := lineClass(plain, m, retried)
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

// lineClass decides the class one line proves, if any. plain is the line
// without ANSI escapes, m its matching copy. The checks run in the order of
// classPrecedence, so a line that names two causes ("stream disconnected
// before completion: rate limit") gets the stronger one. provider says the
// line is known to be about the model call (a retry notice's reason), as a
// provider marker in it would.
func lineClass(plain, m string, provider bool) (FailureClass, bool) {
	trimmed := strings.TrimSpace(m)
	if strings.TrimSpace(plain) == "terminated" {
		return FailProviderStreamDisconnect, true
	}
	if c, ok := piExactLines[trimmed]; ok {
		return c, true
	}

	marker := provider || containsAny(m, markerWords) && (reProviderMarker.MatchString(m) ||
		(reBackend.MatchString(m) && reBackendModel.MatchString(m)))
	status := 0
	if strings.ContainsAny(m, "45") {
		status = httpStatus(m, marker)
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

	case reConnectionStrong.MatchString(m), reConnectionCodex.MatchString(plain),
		ctx && reConnectionWeak.MatchString(m):
		return FailProviderConnection, true

	case status != 0, reAPIErrorMarker.MatchString(m), reCLIFatal.MatchString(m):
		return FailGeneric, true
	}
	return "", false
}

// httpStatus returns the HTTP error status (400-599) a line reports in a
// provider's error format, or 0. The generic forms ("status 429", "HTTP 503",
// "(401)", "code": 500) count only on a line with a provider marker.
func httpStatus(m string, marker bool) int {
	if g := reStatusLead.FindStringSubmatch(m); g != nil && reStatusLeadRest.MatchString(g[2]) {
		return atoiStatus(g[1])
	}
	if g := reStatusCodexLead.FindStringSubmatch(m); g != nil {
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

// ClassifyExitCode maps the exit codes that mean something by themselves for
// a runner to a failure class. ok is false for every other code: the run is
// then judged by its output (its terminal diagnostics), or is generic-error.
//
// Only gemini-cli documents such codes (packages/core/src/utils/exitCodes.ts,
// docs/cli/headless.md):
//
//	41  auth (FatalAuthenticationError)       → provider-auth
//	42  input                                 → spawn-failed
//	44  sandbox                               → spawn-failed
//	52  config                                → spawn-failed
//	53  turn limit (MaxSessionTurnsError)     → ok=false: a step cap, see [StepCapExit]
//	54  tool execution                        → ok=false: no class of its own
//	55  untrusted workspace                   → spawn-failed
//	130 cancelled                             → ok=false: a termination, see [SignalFromExitCode]
//
// 42, 44, 52 and 55 mean gemini refused to begin the task (bad input, no
// sandbox, bad configuration, a workspace it does not trust): like a program
// that is not there, the worker never worked and will refuse again, so they
// are spawn-failed and not retryable. 54 is a tool that failed during the
// task, which may not happen again: it would be generic-error, so it is left
// to the worker's diagnostics, which may say more. 130 is SIGINT; whether
// pilot's caller cancelled is pilot's to know, not the exit code's, so the
// termination path judges it. codex, Claude Code, pi and opencode exit 1
// for every failure, and 143, 137, 130 and other 128+N codes are
// terminations for every runner: none of them is classified here.
func ClassifyExitCode(runner string, code int) (FailureClass, bool) {
	if runner != "gemini" {
		return "", false
	}
	switch code {
	case 41:
		return FailProviderAuth, true
	case 42, 44, 52, 55:
		return FailSpawn, true
	}
	return "", false
}

// StepCapExit reports whether code is the runner's exit for stopping at its
// own turn or step limit, which the Dispatcher reports as
// step_capped_partial rather than a failure: gemini-cli's 53 (turn limit,
// MaxSessionTurnsError). Claude Code reports its limit in the result event
// (subtype error_max_turns), not in the exit code.
func StepCapExit(runner string, code int) bool {
	return runner == "gemini" && code == 53
}

// SignalFromExitCode returns the signal a 128+N exit code (129 to 159)
// stands for: the shell's and most CLIs' way of saying "ended by signal N"
// (143 is SIGTERM, 137 SIGKILL, 130 SIGINT). The signal is inferred: a
// program may exit with such a code on its own. gemini-cli does: it exits
// with an API error's HTTP status, whose low 8 bits put 400 to 415 at 144
// to 159; the gemini runner's watcher, which has seen the error event,
// judges those itself.
func SignalFromExitCode(code int) (sig syscall.Signal, ok bool) {
	if code < 129 || code > 159 {
		return 0, false
	}
	return syscall.Signal(code - 128), true
}

// TerminalDiagnostic reports whether a line from runner's stream counts as
// evidence of how the run ended at all, that is whether [ExtractDiagnostic]
// returns text for it.
func TerminalDiagnostic(runner string, stream Stream, line string) bool {
	_, ok := ExtractDiagnostic(runner, stream, line)
	return ok
}

// ExtractDiagnostic returns the text of a worker's output line that should
// be classified with [ClassifyFailure], and whether the line is a
// diagnostic at all.
//
// A stderr line is its own text for every runner: stderr is where the CLIs
// (and arbitrary commands) report their own trouble. stdout lines count only
// as the error events of a known runner's JSON stream, and then the text is
// the error prose the event carries:
//
//   - pi: message_end, turn_end, a session file's message entry, or the last
//     message of agent_end, when it is an assistant message with stopReason
//     "error": its errorMessage ("Request error" when empty, as pi's text
//     mode prints; " (provider error)" added to a "<status> <body>" that
//     proves nothing alone); auto_retry_end with success false: its finalError.
//     Anything else pi prints on stdout is the model's event stream, and a
//     model may write "provider_tunnel_error: connection refused" as text.
//   - codex (exec --json): turn.failed: error.message; a top-level error:
//     its message, but not "Reconnecting... N/M" notices, which are retries
//     in progress. Error items (item.completed, type error) are warnings.
//   - claude (stream-json): result with is_error: its result text (or its
//     errors), then " (api_error_status: N)" when the status is set and
//     " (terminal_reason: R)" when R says more than api_error or completed;
//     an assistant message with an error category (the synthetic message
//     carrying an API error): its text, and " (api error: <category>)"
//     when the text alone proves no class.
//   - opencode (run --format json): error: "<error.name>: <data.message>",
//     then " (statusCode: N)" when set, and " (provider request)" for an
//     UnknownError that is Bun's fetch failing to connect ("Unable to
//     connect. Is the computer able to access the url?"): opencode reports
//     the model request's connection failure that way, without a provider
//     name, and the classifier needs one. " (provider stream closed)" is
//     added to an error carrying Bun's "The socket connection was closed
//     unexpectedly" (which the AI SDK still words "Cannot connect to API")
//     and to opencode's "Connection reset by server": the provider closed or
//     reset a connection it had accepted (see opencodeErrorText). On stderr, opencode's own log lines
//     (--print-logs: "timestamp=… level=… message=…") are diagnostics only
//     when they are the model call's "stream error" (level ERROR, not the
//     small model's side request): its error.error, worded like the error
//     event ("AI_APICallError: m" becomes "APICallError: m"). Its other log
//     lines never count: they quote the model's tool input (a bash
//     command's text) and opencode's own chatter.
//   - gemini (stream-json): result with status error:
//     "<error.type>: <error.message>", then " (model response stream
//     terminated)" when the message is "[API Error: terminated]" (undici's
//     word for a response body cut short, which alone proves no class);
//     error with severity error: message.
//
// Unknown runners and "command" have no JSON stream: their stdout never
// counts. Blank lines and retry notices never count.
func ExtractDiagnostic(runner string, stream Stream, line string) (text string, ok bool) {
	if runner == RunnerOpencode && stream == Stderr {
		if l, isLog := parseOpencodeLog(line); isLog {
			return opencodeLogDiagnostic(l)
		}
	}
	if stream == Stderr {
		if strings.TrimSpace(line) == "" || retryInProgress(strings.ToLower(line)) {
			return "", false
		}
		return line, true
	}
	if stream != Stdout {
		return "", false
	}
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "{") {
		return "", false
	}
	switch runner {
	case "pi":
		text, ok = piDiagnostic(t)
	case "codex":
		text, ok = codexDiagnostic(t)
	case "claude":
		text, ok = claudeDiagnostic(t)
	case "opencode":
		text, ok = opencodeDiagnostic(t)
	case "gemini":
		text, ok = geminiDiagnostic(t)
	}
	if !ok || strings.TrimSpace(text) == "" {
		return "", false
	}
	return text, true
}

// piMessage is the part of a pi AgentMessage that tells an error.
type piMessage struct {
	Role         string `json:"role"`
	StopReason   string `json:"stopReason"`
	ErrorMessage string `json:"errorMessage"`
}

func (m piMessage) diagnostic() (string, bool) {
	if m.Role != "assistant" || m.StopReason != "error" {
		return "", false
	}
	if m.ErrorMessage == "" {
		return "Request error", true
	}
	return piErrorText(m.ErrorMessage), true
}

// piErrorText is the text to classify for an errorMessage of pi's model
// call. pi writes an HTTP failure as "<status> <body>"; the body is
// whatever the endpoint sent ("500 upstream boom"), which may hold no word
// that proves a provider. The message comes from the model call itself, so
// a leading status is the provider's: when the message proves nothing
// alone, " (provider error)" is added, which lets the status count.
func piErrorText(msg string) string {
	if reStatusLead.MatchString(strings.ToLower(msg)) && ClassifyFailure(msg).Evidence == "" {
		return msg + " (provider error)"
	}
	return msg
}

func piDiagnostic(line string) (string, bool) {
	// Skip the (often huge) streaming events without decoding them.
	// pi writes its JSON with JSON.stringify, so without spaces.
	if !strings.Contains(line, `"stopReason":"error"`) && !strings.Contains(line, `"auto_retry_end"`) {
		return "", false
	}
	var ev struct {
		Type       string          `json:"type"`
		Message    json.RawMessage `json:"message"`
		Messages   json.RawMessage `json:"messages"`
		Success    *bool           `json:"success"`
		FinalError string          `json:"finalError"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return "", false
	}
	switch ev.Type {
	case "message_end", "turn_end", "message":
		var m piMessage
		if json.Unmarshal(ev.Message, &m) != nil {
			return "", false
		}
		return m.diagnostic()
	case "agent_end":
		var ms []piMessage
		if json.Unmarshal(ev.Messages, &ms) != nil {
			return "", false
		}
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Role == "assistant" {
				return ms[i].diagnostic()
			}
		}
	case "auto_retry_end":
		if ev.Success != nil && !*ev.Success {
			return ev.FinalError, true
		}
	}
	return "", false
}

func codexDiagnostic(line string) (string, bool) {
	var ev struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return "", false
	}
	switch ev.Type {
	case "turn.failed":
		return ev.Error.Message, true
	case "error":
		if retryInProgress(strings.ToLower(ev.Message)) {
			return "", false
		}
		return ev.Message, true
	}
	return "", false
}

// claudeDiagnostic reads Claude Code's stream-json error events: a result
// with is_error, and the synthetic assistant message that carries an API
// error's text with its category in "error" (authentication_failed,
// billing_error, rate_limit, invalid_request, server_error, unknown). The
// category is added as " (api error: <category>)" when the text alone
// proves nothing: Claude Code's texts ("Invalid API key · Fix external API
// key", "Rate limit exceeded") do not always say by themselves that the
// API refused. A text that does prove a class keeps it: the category is
// coarse (server_error for a refused connection and a dropped stream
// alike).
func claudeDiagnostic(line string) (string, bool) {
	// Most lines are the model's messages: skip them without decoding.
	if !strings.Contains(line, `"is_error"`) && !strings.Contains(line, `"error"`) {
		return "", false
	}
	var ev struct {
		Type           string            `json:"type"`
		Subtype        string            `json:"subtype"`
		IsError        bool              `json:"is_error"`
		Result         string            `json:"result"`
		Errors         []json.RawMessage `json:"errors"`
		APIErrorStatus *int              `json:"api_error_status"`
		TerminalReason string            `json:"terminal_reason"`
		Error          json.RawMessage   `json:"error"`
		Message        struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return "", false
	}
	switch {
	case ev.Type == "result" && ev.IsError:
		return claudeResultDiagnostic(ev.Result, ev.Errors, ev.Subtype, ev.APIErrorStatus, ev.TerminalReason), true
	case ev.Type == "assistant":
		var category string
		if json.Unmarshal(ev.Error, &category) != nil || category == "" {
			return "", false
		}
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		var texts []string
		if json.Unmarshal(ev.Message.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
					texts = append(texts, strings.TrimSpace(b.Text))
				}
			}
		}
		text := strings.Join(texts, " ")
		if text != "" && ClassifyFailure(text).Evidence != "" {
			// The text proves its class ("Connection refused ...
			// (ECONNREFUSED)"); Claude's coarse category
			// (server_error for any transport trouble) would only
			// blur it.
			return text, true
		}
		if text != "" {
			text += " "
		}
		return text + "(api error: " + category + ")", true
	}
	return "", false
}

// claudeResultDiagnostic is the text of a result with is_error: its result
// text (or its errors), then " (api_error_status: N)" when the status is set
// and " (terminal_reason: R)" when R says more than api_error or completed.
func claudeResultDiagnostic(result string, rawErrors []json.RawMessage, subtype string, status *int, reason string) string {
	text := result
	if text == "" {
		var errs []string
		for _, raw := range rawErrors {
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				errs = append(errs, s)
			}
		}
		text = strings.Join(errs, "; ")
	}
	if text == "" {
		text = subtype
	}
	if status != nil {
		text += " (api_error_status: " + strconv.Itoa(*status) + ")"
	}
	switch reason {
	case "", "completed", "api_error":
	default:
		text += " (terminal_reason: " + reason + ")"
	}
	return strings.TrimSpace(text)
}

func opencodeDiagnostic(line string) (string, bool) {
	var ev struct {
		Type  string `json:"type"`
		Error struct {
			Name string `json:"name"`
			Data struct {
				Message    string `json:"message"`
				StatusCode *int   `json:"statusCode"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil || ev.Type != "error" {
		return "", false
	}
	return opencodeErrorText(ev.Error.Name, ev.Error.Data.Message, ev.Error.Data.StatusCode), true
}

// opencodeErrorText is the text to classify for an opencode error named name
// with message msg (and HTTP status, when known): "<name>: <msg>", then
// " (statusCode: N)", then a note for Bun's connection failures, whose words
// alone prove no provider class:
//
//   - " (provider request)" for an UnknownError holding Bun's "Unable to
//     connect. Is the computer able to access the url?": opencode reports
//     the model request's connection failure that way, without a provider
//     name.
//   - " (provider stream closed)" for Bun's "The socket connection was closed
//     unexpectedly" (its ConnectionClosed): the endpoint accepted the
//     connection and closed it before the answer was whole. The AI SDK
//     wraps every failed fetch as "Cannot connect to API: …", but this one
//     did connect: Bun reports a response cut mid-stream this way when the
//     close arrives before fetch has handed the response over (seen against
//     fakellm's Dropped step, which sends the status line and half the
//     stream, then closes). It is Bun's wording of undici's "other side
//     closed", which is a stream disconnect too; an endpoint that never
//     accepts gives Bun's "Unable to connect" instead. And for opencode's
//     APIError "Connection reset by server", its name for an ECONNRESET
//     outside fetch, that is while the response streams in (see
//     opencodeConnReset).
func opencodeErrorText(name, msg string, status *int) string {
	text := name
	if msg != "" {
		if text != "" {
			text += ": "
		}
		text += msg
	}
	if status != nil {
		text += " (statusCode: " + strconv.Itoa(*status) + ")"
	}
	switch {
	case name == "UnknownError" && strings.Contains(msg, bunConnectFailed):
		text += " (provider request)"
	case strings.Contains(msg, bunSocketClosed), name == "APIError" && msg == opencodeConnReset:
		text += " (provider stream closed)"
	}
	return text
}

// opencodeConnReset is the message opencode gives an error with code
// ECONNRESET (its message-v2 fromError). A failed fetch never gets there:
// the AI SDK wraps those, ECONNRESET included, as "Cannot connect to API:
// …". So it is the response stream being reset after the response began
// (seen against fakellm's Dropped step, after a step_start).
const opencodeConnReset = "Connection reset by server"

// bunConnectFailed is the message of Bun's fetch when it cannot connect.
// opencode (which runs on Bun) reports it as an UnknownError when the model
// request itself cannot connect; the error event carries no provider name.
const bunConnectFailed = "Unable to connect. Is the computer able to access the url?"

// bunSocketClosed is the message of Bun's fetch when the other side closes
// a connection before the response is whole.
const bunSocketClosed = "The socket connection was closed unexpectedly"

// An opencodeLog is one of opencode's log lines, as --print-logs writes them
// to stderr: logfmt, "timestamp=2026-11-30T07:16:13.903Z level=ERROR
// run=ccd5097b message="stream error" providerID=pilot … small=false …
// error.error="AI_APICallError: fakellm: boom"". Only the fields pilot reads
// are kept.
type opencodeLog struct {
	Level     string // DEBUG, INFO, WARN, ERROR
	Message   string
	SessionID string // session.id
	Small     string // "true" for the small model's side requests (the title)
	Err       string // error.error: the failed model call's error
	ID        string // id (message=created: the new session's id)
	Action    string // action.action (message=evaluated: allow, deny, ask)
	Perm      string // permission (message=evaluated)
}

// parseOpencodeLog reads line as one of opencode's log lines; isLog is false
// when it is not one (a line opencode printed itself, a crash).
func parseOpencodeLog(line string) (l opencodeLog, isLog bool) {
	if !strings.HasPrefix(line, "timestamp=") || !strings.Contains(line, " level=") {
		return l, false
	}
	rest := line
	for rest != "" {
		var key, val string
		key, val, rest = nextLogfmt(rest)
		switch key {
		case "level":
			l.Level = val
		case "message":
			l.Message = val
		case "session.id":
			l.SessionID = val
		case "small":
			l.Small = val
		case "error.error":
			l.Err = val
		case "id":
			l.ID = val
		case "action.action":
			l.Action = val
		case "permission":
			l.Perm = val
		}
	}
	return l, true
}

// nextLogfmt reads the first key=value pair of s and returns what follows.
// A value is bare (up to the next space) or a JSON string in quotes; a
// quoted value that does not decode is kept as written between the quotes.
// Text that is no pair (a key without "=") is skipped up to the next space.
func nextLogfmt(s string) (key, val, rest string) {
	s = strings.TrimLeft(s, " ")
	eq := strings.IndexAny(s, "= ")
	if eq < 0 || s[eq] == ' ' {
		if eq < 0 {
			return "", "", ""
		}
		return "", "", s[eq:]
	}
	key, s = s[:eq], s[eq+1:]
	if !strings.HasPrefix(s, `"`) {
		if sp := strings.IndexByte(s, ' '); sp >= 0 {
			return key, s[:sp], s[sp:]
		}
		return key, s, ""
	}
	end := 1
	for end < len(s) && s[end] != '"' {
		if s[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(s) {
		// No closing quote: the value runs to the end of the line.
		return key, s[1:], ""
	}
	quoted := s[:end+1]
	if err := json.Unmarshal([]byte(quoted), &val); err != nil {
		val = quoted[1 : len(quoted)-1]
	}
	return key, val, s[end+1:]
}

// opencodeLogDiagnostic is the diagnostic text of an opencode log line: the
// main model call's "stream error", worded like the error event.
func opencodeLogDiagnostic(l opencodeLog) (string, bool) {
	if l.Level != "ERROR" || l.Message != "stream error" || l.Small == "true" || strings.TrimSpace(l.Err) == "" {
		return "", false
	}
	name, msg, found := strings.Cut(l.Err, ": ")
	if !found || strings.ContainsAny(name, " ") {
		name, msg = "", l.Err
	}
	// The AI SDK's error names carry an "AI_" prefix ("AI_APICallError")
	// that its error events do not.
	name = strings.TrimPrefix(name, "AI_")
	return opencodeErrorText(name, msg, nil), true
}

// geminiTerminated is gemini-cli's result error when the model's answer
// broke off mid-stream: undici's fetch reports a response body cut short
// (the server closed the connection: "other side closed") as "terminated",
// which gemini does not retry and wraps as an API error. A request that
// never connects fails earlier, as "fetch failed". Seen in an e2e run of
// gemini-cli 0.61.0 against fakellm (testdata/gemini/stream/
// e2e-stream-terminated).
const geminiTerminated = "[API Error: terminated]"

func geminiDiagnostic(line string) (string, bool) {
	var ev struct {
		Type     string `json:"type"`
		Status   string `json:"status"`
		Severity string `json:"severity"`
		Message  string `json:"message"`
		Error    struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return "", false
	}
	switch {
	case ev.Type == "result" && ev.Status == "error":
		text := ev.Error.Type
		if ev.Error.Message != "" {
			if text != "" {
				text += ": "
			}
			text += ev.Error.Message
		}
		if strings.TrimSpace(ev.Error.Message) == geminiTerminated {
			text += " (model response stream terminated)"
		}
		return text, true
	case ev.Type == "error" && ev.Severity == "error":
		return ev.Message, true
	}
	return "", false
}

// A FailureReport is the key=value summary of a failed run that the seed
// dispatcher printed (failure_report_lines) and kept in its record: the
// classification, where its evidence came from, how the process ended and
// which pilot build judged it.
type FailureReport struct {
	Class FailureClass
	// Source says what decided Class: "provider-terminal-diagnostic" (a
	// provider line from the worker), "process-termination",
	// "exit-code", "pilot", ...
	Source string
	// EvidenceSource is where the evidence line came from ("pi:stderr").
	EvidenceSource string
	// Evidence is the line itself. The report does not redact it: pass it
	// through the Dispatcher's redaction first.
	Evidence           string
	TransportConfirmed bool
	RetryAfter         time.Duration

	// TerminationSignal names the signal that ended the worker
	// ("SIGTERM"); TerminationSignalInferred is set when it was read from
	// a 128+N exit code ([SignalFromExitCode]) rather than seen;
	// TerminationInitiator is "pilot" or "unknown".
	TerminationSignal         string
	TerminationSignalInferred bool
	TerminationInitiator      string

	// DispatcherPID is the judging process; DispatcherSourceSHA256 the
	// digest of the pilot executable it loaded and
	// DispatcherCurrentSHA256 the digest of the file now, which differ
	// when it was rebuilt while running (a "hot edit" the running process
	// does not reflect).
	DispatcherPID           int
	DispatcherSourceSHA256  string
	DispatcherCurrentSHA256 string
}

// Report makes the FailureReport of c, its evidence read from
// evidenceSource ("pi:stderr"). When c has evidence, Source is
// "provider-terminal-diagnostic" for a provider class or context-limit and
// "terminal-diagnostic" for a recognised error of no narrower class;
// otherwise the caller sets it.
func (c Classification) Report(evidenceSource string) FailureReport {
	r := FailureReport{
		Class:              c.Class,
		Evidence:           c.Evidence,
		TransportConfirmed: c.TransportConfirmed,
		RetryAfter:         c.RetryAfter,
	}
	if c.Evidence != "" {
		r.Source = "terminal-diagnostic"
		if c.Class.Provider() || c.Class == FailContextLimit || c.TransportConfirmed {
			r.Source = "provider-terminal-diagnostic"
		}
		r.EvidenceSource = evidenceSource
	}
	return r
}

// Lines returns the report as key=value lines, in a fixed order, leaving out
// what is unset: failure_class, failure_source,
// provider_transport_failure_confirmed (always), failure_evidence_source,
// provider_evidence (evidence from a provider diagnostic) or
// failure_evidence (other evidence), retry_after, termination_signal,
// termination_signal_inferred, termination_initiator, dispatcher_pid,
// dispatcher_source_sha256, dispatcher_source_current_sha256 and
// dispatcher_source_matches_loaded (when both digests are known). Newlines
// and carriage returns in values are written as \n and \r, so every key
// stays on one line.
func (r FailureReport) Lines() []string {
	var out []string
	add := func(k, v string) { out = append(out, k+"="+reportEscaper.Replace(v)) }
	add("failure_class", string(r.Class))
	if r.Source != "" {
		add("failure_source", r.Source)
	}
	add("provider_transport_failure_confirmed", strconv.FormatBool(r.TransportConfirmed))
	if r.EvidenceSource != "" {
		add("failure_evidence_source", r.EvidenceSource)
	}
	if r.Evidence != "" {
		if r.Source == "provider-terminal-diagnostic" {
			add("provider_evidence", r.Evidence)
		} else {
			add("failure_evidence", r.Evidence)
		}
	}
	if r.RetryAfter > 0 {
		add("retry_after", r.RetryAfter.String())
	}
	if r.TerminationSignal != "" {
		add("termination_signal", r.TerminationSignal)
		add("termination_signal_inferred", strconv.FormatBool(r.TerminationSignalInferred))
	}
	if r.TerminationInitiator != "" {
		add("termination_initiator", r.TerminationInitiator)
	}
	if r.DispatcherPID != 0 {
		add("dispatcher_pid", strconv.Itoa(r.DispatcherPID))
	}
	if r.DispatcherSourceSHA256 != "" {
		add("dispatcher_source_sha256", r.DispatcherSourceSHA256)
	}
	if r.DispatcherCurrentSHA256 != "" {
		add("dispatcher_source_current_sha256", r.DispatcherCurrentSHA256)
	}
	if r.DispatcherSourceSHA256 != "" && r.DispatcherCurrentSHA256 != "" {
		add("dispatcher_source_matches_loaded", strconv.FormatBool(r.DispatcherSourceSHA256 == r.DispatcherCurrentSHA256))
	}
	return out
}

var reportEscaper = strings.NewReplacer("\n", `\n`, "\r", `\r`)
