package pilot_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/report"
)

// The flag has a name of its own so that other golden tests in this package
// can declare -update without a clash.
var updateClassify = flag.Bool("update-classify", false, "rewrite testdata/classify/*.golden")

// The seed's provider line (tests/test_dispatch.py).
const seedProviderLine = "provider_tunnel_error: dial tcp 192.0.2.1:8001: connect: connection refused"

type classifyCase struct {
	name string
	why  string
	text string
	want pilot.Classification
}

// transport, other and none build the wanted classification of text whose
// evidence is the line ev.
func transport(c pilot.FailureClass, ev string) pilot.Classification {
	return pilot.Classification{Class: c, Evidence: ev, TransportConfirmed: true}
}

func other(c pilot.FailureClass, ev string) pilot.Classification {
	return pilot.Classification{Class: c, Evidence: ev}
}

var none = pilot.Classification{Class: pilot.FailGeneric}

func withRetry(c pilot.Classification, d time.Duration) pilot.Classification {
	c.RetryAfter = d
	return c
}

// same is a case whose text is a single line that is its own evidence.
func same(name, why string, c pilot.FailureClass, line string) classifyCase {
	switch c {
	case pilot.FailProviderConnection, pilot.FailProviderStreamDisconnect,
		pilot.FailProviderServerError, pilot.FailProviderRateLimit:
		return classifyCase{name, why, line, transport(c, line)}
	}
	return classifyCase{name, why, line, other(c, line)}
}

// weak is a case that must prove nothing.
func weak(name, why, text string) classifyCase {
	return classifyCase{name, why, text, none}
}

var (
	connection = pilot.FailProviderConnection
	stream     = pilot.FailProviderStreamDisconnect
	rateLimit  = pilot.FailProviderRateLimit
	quota      = pilot.FailProviderQuota
	server     = pilot.FailProviderServerError
	auth       = pilot.FailProviderAuth
	contextLim = pilot.FailContextLimit
	generic    = pilot.FailGeneric
)

// classifyGroup is a named set of classification cases.
type classifyGroup struct {
	name  string
	cases []classifyCase
}

// The seed's classification tests (tests/test_dispatch.py,
// ReviewControlTest), each a group named after its test: they run as
// TestClassifyFailure/ClassifiesProviderTunnelConnectionRefusal/... and so
// on.
var seedClassifyGroups = []classifyGroup{
	// test_classifies_provider_tunnel_connection_refusal
	{"ClassifiesProviderTunnelConnectionRefusal", []classifyCase{
		same("provider tunnel connection refusal",
			"a provider marker plus connection refused is a provider connection failure",
			connection, seedProviderLine),
		{"provider tunnel line after an unrelated warning",
			"the evidence is the provider line alone, not the warning before it",
			"unrelated warning\n" + seedProviderLine, transport(connection, seedProviderLine)},
	}},
	// test_generic_tool_stderr_is_not_provider_transport_evidence
	{"GenericToolStderrIsNotProviderTransportEvidence", []classifyCase{
		weak("pytest connection refused",
			"a test's connection refused names no provider",
			"pytest setup failed: connection refused while opening fixture"),
		weak("bare dial tcp",
			"a bare dial error could be any program's",
			"dial tcp 127.0.0.1:9999: connect: connection refused"),
		weak("curl peer failure",
			"curl's receive failure names no provider",
			"curl error: failure when receiving data from the peer"),
	}},
	// test_provider_stream_requires_strong_backend_or_sse_context
	{"ProviderStreamRequiresStrongBackendOrSseContext", []classifyCase{
		same("model backend SSE stream before DONE",
			"a model backend and an SSE stream that ended before DONE is a stream disconnect",
			stream, "Backend for model crashed before streaming started: SSE stream before DONE"),
	}},
}

// The texts the agent CLIs print, from shared/research/agent-cli-formats.md
// (§1.5, §2.5, §3, §4, §5 and the §6 table).
var cliClassifyCases = []classifyCase{
	// pi (§1.5, §6). In text mode pi prints errorMessage alone on stderr.
	same("pi connection error", "the OpenAI SDK's APIConnectionError message, exactly", connection, "Connection error."),
	same("pi request timed out", "the OpenAI SDK's APIConnectionTimeoutError message, exactly", connection, "Request timed out."),
	same("pi fetch failed", "undici's fetch failure, in pi's retry regex", connection, "fetch failed"),
	same("pi terminated", "undici's errorMessage for a stream cut mid-response (fixture line 33)", stream, "terminated"),
	same("pi other side closed", "undici's SocketError message for a dropped stream", stream, "other side closed"),
	same("pi request ended without chunks", "retryable since pi 0.66.0: the stream produced nothing", stream, "request ended without sending any chunks"),
	same("pi 429 rate limited", "pi prints the status first; 429 is a rate limit", rateLimit, "429 rate limited"),
	same("pi 429 no body", "the SDK's text for a bodyless 429", rateLimit, "429 status code (no body)"),
	{"pi 429 with OpenAI's try-again hint",
		"the delay OpenAI names becomes RetryAfter",
		"429 Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29500, Requested 1200. Please try again in 1.4s. Visit https://platform.openai.com/account/rate-limits to learn more.",
		withRetry(transport(rateLimit, "429 Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29500, Requested 1200. Please try again in 1.4s. Visit https://platform.openai.com/account/rate-limits to learn more."), 1400*time.Millisecond)},
	same("pi 500 JSON body", "5xx with the provider's error body", server, `500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}`),
	same("pi 502 no body", "a bodyless 502 (§6)", server, "502 status code (no body)"),
	same("pi 529 overloaded JSON", "auto_retry_start's errorMessage in pi's rpc docs", server, `529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
	same("pi 529 overloaded final error", "auto_retry_end's finalError in pi's rpc docs", server, "529 overloaded_error: Overloaded"),
	same("pi 503 service unavailable", "in pi's retry regex", server, "503 Service Unavailable"),
	same("pi upstream connect error", "envoy's text, in pi's retry regex", connection, "upstream connect error or disconnect/reset before headers. reset reason: connection failure"),
	same("pi 401 Anthropic body", "401 is an auth failure, not retried", auth, `401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`),
	same("pi 401 OpenAI incorrect key", "401 with OpenAI's message", auth, "401 Incorrect API key provided: sk-mock***1234. You can find your API key at https://platform.openai.com/account/api-keys."),
	same("pi newer OpenAI API error 401", "the newer pi format (earendil-works/pi#9089)", auth, `OpenAI API error (401): {"error":{"message":"Invalid token","type":"invalid_request_error"}}`),
	same("pi no API key found", "pi's pre-flight error, thrown before any request", auth, "Error: No API key found for mock."),
	same("pi authentication failed for provider", "pi's expired-credentials error", auth, `Authentication failed for "anthropic". Credentials may have expired. Run /login to re-authenticate.`),
	same("pi no model selected", "a pre-flight error of no narrower class", generic, "No model selected."),
	same("pi no models available", "a pre-flight error of no narrower class", generic, "No models available."),
	same("pi 400 tool_use without tool_result", "a provider 400 that is not an overflow is a recognised API error (before-compaction fixture line 848)", generic,
		`400 {"type":"error","error":{"type":"invalid_request_error","message":"messages.236: `+"`tool_use`"+` ids were found without `+"`tool_result`"+` blocks immediately after: toolu_019tYDrbzifrra2KYzmYqWvk. Each `+"`tool_use`"+` block must have a corresponding `+"`tool_result`"+` block in the next message."},"request_id":"req_011CVvAQm5gLufA1cDeHobKh"}`),

	// pi's context-overflow patterns (§1.5), one line each.
	same("pi overflow prompt is too long", "pi overflow pattern", contextLim, `400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}`),
	same("pi overflow input is too long for requested model", "pi overflow pattern", contextLim, "400 Input is too long for requested model."),
	same("pi overflow exceeds the context window", "pi overflow pattern", contextLim, "400 Your input exceeds the context window of this model. Please adjust your input and try again."),
	same("pi overflow input token count exceeds the maximum", "pi overflow pattern", contextLim, "400 The input token count (1196265) exceeds the maximum number of tokens allowed (1048576)."),
	same("pi overflow maximum prompt length", "pi overflow pattern", contextLim, "400 This model's maximum prompt length is 131072 but the request contains 140000 tokens."),
	same("pi overflow reduce the length of the messages", "pi overflow pattern", contextLim, "400 Please reduce the length of the messages or completion."),
	same("pi overflow maximum context length tokens", "pi overflow pattern", contextLim, "400 This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens."),
	same("pi overflow exceeds the limit of", "a vague pi pattern, here with a status for context", contextLim, "400 prompt exceeds the limit of 32768 tokens"),
	same("pi overflow exceeds the available context size", "pi overflow pattern", contextLim, "400 the request exceeds the available context size, try increasing it"),
	same("pi overflow greater than the context length", "pi overflow pattern", contextLim, "400 tokens to keep from the initial prompt is greater than the context length"),
	same("pi overflow context window exceeds limit", "pi overflow pattern", contextLim, "400 invalid params, context window exceeds limit (2013)"),
	same("pi overflow exceeded model token limit", "pi overflow pattern", contextLim, "400 Your request exceeded model token limit: 262144"),
	same("pi overflow too large for model", "pi overflow pattern", contextLim, "400 Prompt contains 140000 tokens, too large for model with 131072 maximum context length"),
	same("pi overflow model_context_window_exceeded", "pi overflow pattern", contextLim, `400 {"error":{"code":"model_context_window_exceeded"}}`),
	same("pi overflow context_length_exceeded", "pi overflow pattern", contextLim, `400 {"error":{"message":"This request is too long.","code":"context_length_exceeded"}}`),
	same("pi overflow context length exceeded", "pi overflow pattern, spaces", contextLim, "API Error: context length exceeded"),
	same("pi overflow too many tokens", "a vague pi pattern, here with a provider marker", contextLim, "API Error: too many tokens"),
	same("pi overflow token limit exceeded", "a vague pi pattern, here with a provider marker", contextLim, "provider error: token limit exceeded"),
	same("pi overflow Cerebras 400 no body", "pi's rule for Cerebras' bodyless 400", contextLim, "400 status code (no body)"),
	same("pi overflow Cerebras 413 no body", "pi's rule for Cerebras' bodyless 413", contextLim, "413 (no body)"),

	// codex (§2.5, §6).
	same("codex stream disconnected", "codex's stream-drop text", stream, "stream disconnected before completion: Transport error: error decoding response body"),
	same("codex stream disconnected before any connection", "the cause says the request never left: a connection failure (§6 connection refused row)", connection, "stream disconnected before completion: error sending request for url (http://127.0.0.1:8080/v1/responses)"),
	same("codex exceeded retry limit 429", "codex's final 429", rateLimit, "exceeded retry limit, last status: 429 Too Many Requests"),
	same("codex exceeded retry limit 503", "codex's final 5xx", server, "exceeded retry limit, last status: 503 Service Unavailable"),
	same("codex unexpected status 401", "codex's HTTP error text", auth, `unexpected status 401 Unauthorized: {"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}`),
	same("codex human-mode ERROR unexpected status 401", "stderr in human mode prefixes ERROR:", auth, "ERROR: unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"),
	same("codex unexpected status 400", "an API error of no narrower class", generic, `unexpected status 400 Bad Request: {"error":{"message":"Unknown parameter: 'reasoning.foo'."}}`),
	same("codex ran out of room", "codex's context-window text", contextLim, "Codex ran out of room in the model's context window. Start a new conversation or clear earlier history before retrying."),
	same("codex quota exceeded", "codex's quota text", quota, "Quota exceeded. Check your plan and billing details."),
	same("codex usage limit", "codex's ChatGPT-plan limit", quota, "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again later."),
	{"codex usage limit with a try-again delay",
		"the delay named after the usage limit becomes RetryAfter",
		"You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 2 hours 15 minutes.",
		withRetry(other(quota, "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 2 hours 15 minutes."), 2*time.Hour+15*time.Minute)},
	same("codex usage limit reached", "turn.failed text from a third-party capture", quota, "usage limit reached"),
	same("codex high demand", "codex's overloaded text", server, "We're currently experiencing high demand, which may cause temporary errors."),
	same("codex missing environment variable", "codex's missing env_key: no credential", auth, "Missing environment variable: `MOCK_API_KEY`."),
	same("codex connection failed", "codex's reqwest connect failure", connection, "Connection failed: error sending request for url (http://127.0.0.1:8080/v1/responses)"),
	same("codex error reading server response", "codex's body-read failure", stream, "Error while reading the server response: error decoding response body"),
	weak("codex reconnecting with cause", "a retry in progress, never evidence", "Reconnecting... 2/5 (request timed out)"),
	weak("gemini retry with backoff", "a retry in progress, never evidence", `Attempt 1 failed with status 429. Retrying with backoff... ApiError: {"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`),
	weak("gemini retry after delay", "a retry in progress, never evidence", "Attempt 2 failed: fetch failed. Retrying after 5000ms..."),
	weak("codex reconnecting bare", "a retry in progress, never evidence", "Reconnecting... 1/5"),
	weak("codex reconnecting stream disconnected", "a retry in progress even when its cause is a stream drop", "Reconnecting... 5/5 (stream disconnected before completion: Transport error: error decoding response body)"),
	same("codex config chat wire api", "a fatal config error of no narrower class", generic, `Error loading config.toml: wire_api = "chat" is no longer supported.`),
	same("codex untrusted directory", "a fatal start-up error of no narrower class", generic, "Not inside a trusted directory and --skip-git-repo-check was not specified."),

	// Claude Code (§3, §6): the result text.
	same("claude unable to connect ECONNREFUSED", "Claude's connection failure", connection, "API Error: Unable to connect to API (ECONNREFUSED)"),
	same("claude unable to connect ENOTFOUND", "Claude's DNS failure", connection, "API Error: Unable to connect to API (ENOTFOUND)"),
	same("claude unable to connect ECONNRESET", "Claude's reset before a response", connection, "API Error: Unable to connect to API (ECONNRESET)"),
	same("claude unable to connect ConnectionRefused", "Bun's spelling of the refusal", connection, "API Error: Unable to connect to API (ConnectionRefused)"),
	same("claude 429", "Claude's rate limit", rateLimit, `API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization"}}`),
	same("claude 529 overloaded", "Claude's overloaded text", server, "API Error: 529 Overloaded"),
	same("claude 500", "a 5xx", server, `API Error: 500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}`),
	same("claude connection closed mid-response", "Claude's stream drop", stream, "API Error: Connection closed mid-response. The response above may be incomplete."),
	same("claude prompt is too long", "Claude's overflow text", contextLim, "Prompt is too long"),
	same("claude invalid API key", "Claude's missing or bad key", auth, "Invalid API key · Please run /login"),
	same("claude failed to authenticate", "Claude's 401", auth, `Failed to authenticate. API Error: 401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`),
	same("claude hit your limit resets at a clock time", "a usage window used up; a clock time gives no RetryAfter", quota, "You've hit your limit · resets 3pm (Europe/Berlin)"),
	{"claude hit your limit with a typographic apostrophe and a duration",
		"’ reads as ' and the reset delay becomes RetryAfter",
		"You’ve hit your weekly limit · resets in 2h 30m",
		withRetry(other(quota, "You’ve hit your weekly limit · resets in 2h 30m"), 2*time.Hour+30*time.Minute)},
	same("claude unrecognized model", "a stderr diagnostic of no narrower class", generic, `[claude-code:unrecognized_model] {"model":"claude-sonet-4-5"}`),
	same("claude stream-json requires verbose", "a start-up error of no narrower class", generic, "Error: When using --print, --output-format=stream-json requires --verbose"),

	// opencode (§4, §6): "<error name>: <message>".
	same("opencode APIError 429", "statusCode with an APIError", rateLimit, "APIError: Too Many Requests (statusCode: 429)"),
	same("opencode APIError 503", "statusCode with an APIError", server, "APIError: Service Unavailable (statusCode: 503)"),
	same("opencode APIError 401", "statusCode with an APIError", auth, "APIError: Unauthorized (statusCode: 401)"),
	same("opencode APIError fetch failed", "a connection failure reported as APIError", connection, "APIError: fetch failed"),
	same("opencode APIError monthly usage limit", "the non-retryable limit of anomalyco/opencode#42268", quota, "APIError: Monthly usage limit reached"),
	same("opencode ProviderAuthError", "opencode's auth error name", auth, "ProviderAuthError: No credentials found for provider mock"),
	same("opencode ContextOverflowError", "opencode's overflow error name", contextLim, "ContextOverflowError: Input exceeds context window of this model"),
	same("opencode MessageOutputLengthError", "the output cap, not the context: no narrower class", generic, "MessageOutputLengthError"),
	same("opencode ProviderModelNotFoundError", "a config error of no narrower class", generic, "ProviderModelNotFoundError: Model not found: mock/nope"),
	same("opencode ContentFilterError", "no narrower class", generic, "ContentFilterError: Output blocked by content filtering policy"),
	same("opencode MessageAbortedError", "no narrower class; pilot judges cancellation itself", generic, "MessageAbortedError: The operation was aborted."),
	same("opencode StructuredOutputError", "no narrower class", generic, "StructuredOutputError: Model did not return valid JSON"),
	weak("opencode UnknownError", "an unknown error with no provider words proves nothing", "UnknownError: boom"),

	// gemini (§5): API errors as gemini-cli prints them.
	same("gemini daily quota", "a daily allowance used up", quota, "[API Error: You have exhausted your daily quota on this model.]"),
	{"gemini 429 resource exhausted",
		"a 429 that only says 'check quota' is a per-minute rate limit; retryDelay becomes RetryAfter",
		`[API Error: {"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}]`,
		withRetry(transport(rateLimit, `[API Error: {"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}]`), 37*time.Second)},
	same("gemini quota per minute", "a per-minute quota is a rate limit", rateLimit, "[API Error: Quota exceeded for quota metric 'Generate Content API requests per minute']"),
	same("gemini API key not valid", "Google's bad-key message in gemini's API Error wrapper (shape, not from the research)", auth, "[API Error: API key not valid. Please pass a valid API key.]"),
	weak("gemini max session turns", "a step cap is no provider failure (exit 53 says so)", "MaxSessionTurnsError: Maximum session turns exceeded"),
}

// The phrases that prove a class with no provider marker or status around
// them, each alone on its line: the providers' error codes and messages,
// and (in cases named after a CLI) the CLIs' own texts.
var strongPhraseClassifyCases = []classifyCase{
	same("bare invalid x-api-key", "Anthropic's message", auth, "invalid x-api-key"),
	same("bare authentication_error", "Anthropic's error type", auth, "error type authentication_error"),
	same("claude authentication_failed alone", "Claude's assistant error", auth, "authentication_failed"),
	same("bare invalid_api_key", "OpenAI's error code", auth, "code: invalid_api_key"),
	same("pi credentials may have expired alone", "pi's expired credentials", auth, "Credentials may have expired."),
	same("claude please run /login alone", "Claude's hint", auth, "Please run /login"),
	same("opencode ProviderAuthError alone", "opencode's name", auth, "ProviderAuthError"),
	same("bare insufficient_quota", "OpenAI's quota code", quota, "insufficient_quota"),
	same("bare exceeded your current quota", "OpenAI's quota message", quota, "You exceeded your current quota, please check your plan and billing details."),
	same("bare credit balance", "Anthropic's billing message", quota, "Your credit balance is too low to access the Anthropic API."),
	same("bare billing_error", "Claude's assistant error", quota, "billing_error"),
	same("bare reached your usage limit", "usage limit wording", quota, "You have reached your usage limit."),
	same("bare input is too long", "pi overflow pattern", contextLim, "Input is too long for requested model."),
	same("bare exceeds the context window", "pi overflow pattern", contextLim, "Your input exceeds the context window of this model."),
	same("bare input token count", "pi overflow pattern", contextLim, "The input token count (1196265) exceeds the maximum number of tokens allowed (1048576)."),
	same("bare maximum prompt length", "pi overflow pattern", contextLim, "This model's maximum prompt length is 131072."),
	same("bare reduce the length", "pi overflow pattern", contextLim, "Please reduce the length of the messages or completion."),
	same("bare maximum context length", "pi overflow pattern", contextLim, "This model's maximum context length is 128000 tokens."),
	same("bare available context size", "pi overflow pattern", contextLim, "the request exceeds the available context size"),
	same("bare greater than the context length", "pi overflow pattern", contextLim, "greater than the context length"),
	same("bare context window exceeds limit", "pi overflow pattern", contextLim, "context window exceeds limit"),
	same("bare exceeded model token limit", "pi overflow pattern", contextLim, "Your request exceeded model token limit: 262144"),
	same("bare too large for model", "pi overflow pattern", contextLim, "too large for model with 131072 maximum context length"),
	same("bare model_context_window_exceeded", "pi overflow pattern", contextLim, "model_context_window_exceeded"),
	same("bare context_length_exceeded", "pi overflow pattern", contextLim, "context_length_exceeded"),
	same("bare exceed context limit", "Anthropic's max_tokens overflow", contextLim, "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000"),
	same("opencode ContextOverflowError alone", "opencode's name", contextLim, "ContextOverflowError"),
	same("bare rate_limit_exceeded", "OpenAI's rate code", rateLimit, "rate_limit_exceeded"),
	same("bare rate_limit_error", "Anthropic's rate type", rateLimit, "rate_limit_error"),
	same("bare overloaded_error", "Anthropic's overloaded type", server, "overloaded_error"),
	same("bare connection closed mid-response", "Claude's stream drop without its prefix", stream, "Connection closed mid-response."),
	same("bare connection to the API was lost", "Claude's reset mid-stream without its prefix", stream, "Connection to the API was lost (ECONNRESET)"),
	same("bare unable to connect to API", "Claude's connection failure without its prefix", connection, "Unable to connect to API (ECONNREFUSED)"),
	same("bare APIConnectionError", "the OpenAI SDK's class name", connection, "APIConnectionError: Connection error."),
	same("bare API Error", "an API error of no narrower class", generic, "API Error: something odd"),
}

// Lines that must prove nothing: weak transport words, digit boundaries,
// informational lines that name a provider.
var weakClassifyCases = []classifyCase{
	weak("web test status code 500", "a status in a test's assertion has no provider context", "handler_test.go:88: expected status code 200, got status code 500"),
	weak("1429 files at line start", "1429 is not a 429", "1429 files changed, 3021 insertions(+)"),
	weak("429 files at line start", "a leading number with no error words is not a status", "429 files changed"),
	weak("500 errors at line start", "'errors' is not an error phrase after a leading number", "500 errors found in the log"),
	weak("port 5000", "5000 is not a 500", "listening on port 5000"),
	weak("upstream 1429 files", "a marker without failure words is not a failure", "upstream: processed 1429 files"),
	weak("disk quota", "a full disk is not a provider quota, even with a provider marker", "provider cache: write /tmp/x: disk quota exceeded"),
	weak("provider informational line", "naming a provider is not failing", "Using provider openai with model gpt-5"),
	weak("model context window informational", "'context window' alone is no overflow", "openai: model context window is 128000 tokens"),
	weak("shell Terminated", "a shell's Terminated reports a signal, not a stream drop", "Terminated"),
	weak("bash job Terminated", "a shell's job report", "bash: line 1: 4242 Terminated              sleep 100"),
	weak("C++ overloaded", "a compiler's overloaded is no server error", "error: call of overloaded 'f(int)' is ambiguous"),
	weak("postgres password authentication", "a database login is no provider auth", `FATAL: password authentication failed for user "postgres"`),
	weak("project backend connection refused", "backend without a model names the project's own server", "backend: dial tcp 127.0.0.1:5432: connect: connection refused"),
	weak("SSE without failure", "an SSE marker with no failure", "SSE client connected"),
	weak("bare stream closed", "a stream closing without provider or SSE context", "stream closed"),
	weak("Claude retrying notice", "a retry in progress", "API Error (429) · Retrying in 5 seconds… (attempt 2/10)"),
	weak("python ConnectionRefusedError", "a test's exception", "E   ConnectionRefusedError: [Errno 111] Connection refused"),
	weak("empty text", "nothing at all", ""),
	weak("blank lines", "whitespace only", "\n  \r\n\t\n"),
	weak("invalid API key of some other API", "a common phrase needs provider context", "weather client: Invalid API key"),
	weak("failed to authenticate to a registry", "a common phrase needs provider context", "Error: failed to authenticate to registry ghcr.io"),
	weak("git authentication failed", "git quotes its URL with '", "fatal: Authentication failed for 'https://github.com/x/y.git/'"),
	weak("missing environment variable that is no key", "codex's form, but a missing DATABASE_URL is no provider's credential", "Missing environment variable: `DATABASE_URL`."),
	weak("TestFetchUpstream", "upstream inside an identifier is no marker", "--- FAIL: TestFetchUpstream (0.01s): connection refused"),
	{"provider connection to port 5000",
		"a 5000 port in a provider's connection failure is no 500",
		"API Error: dial tcp 127.0.0.1:5000: connect: connection refused",
		transport(connection, "API Error: dial tcp 127.0.0.1:5000: connect: connection refused")},
	{"status 4290 with a provider marker",
		"digit boundary after the status: 4290 is no 429",
		"provider: status 4290",
		none},
}

// Several lines: precedence, the last line of a class, exact evidence.
var multiLineClassifyCases = []classifyCase{
	{"rate limit beats stream disconnect",
		"a 429 decides the wait even after stream drops",
		"upstream stream disconnected: error decoding response body\nAPI Error: 429 Too Many Requests",
		transport(rateLimit, "API Error: 429 Too Many Requests")},
	{"auth beats server error before and after",
		"a refused key fails every retry, whatever transient noise surrounds it",
		"provider openai: 503 Service Unavailable\n401 Incorrect API key provided\nprovider openai: 503 Service Unavailable",
		other(auth, "401 Incorrect API key provided")},
	{"quota beats context limit",
		"precedence order",
		"Prompt is too long\nQuota exceeded. Check your plan and billing details.",
		other(quota, "Quota exceeded. Check your plan and billing details.")},
	{"context limit beats rate limit",
		"precedence order",
		"429 rate limited\nThis model's maximum context length is 131072 tokens.\n429 rate limited",
		other(contextLim, "This model's maximum context length is 131072 tokens.")},
	{"server error beats stream disconnect",
		"precedence order",
		"API Error: 529 Overloaded\nterminated",
		transport(server, "API Error: 529 Overloaded")},
	{"stream disconnect beats connection",
		"precedence order",
		"upstream: other side closed\nprovider: connection error",
		transport(stream, "upstream: other side closed")},
	{"connection beats recognised API error",
		"a generic API error comes last",
		"provider: connection error\nAPI Error: 400 Bad Request: nope",
		transport(connection, "provider: connection error")},
	{"last line of the winning class",
		"among lines of one class the one nearest the end wins",
		"provider: connection error\nprovider: fetch failed\nsome trailing noise",
		transport(connection, "provider: fetch failed")},
	{"reconnecting notices then turn failure",
		"retries in progress are skipped; the terminal line is the evidence",
		"retrying in 1s (upstream stream disconnected)\nretrying in 2s (upstream stream disconnected)\nupstream stream disconnected: error decoding response body",
		transport(stream, "upstream stream disconnected: error decoding response body")},
	{"evidence keeps leading and trailing spaces",
		"the evidence is the line byte for byte, indentation included",
		"Traceback (most recent call last):\n    " + seedProviderLine + "  \n  more",
		transport(connection, "    "+seedProviderLine+"  ")},
	{"CRLF line endings",
		"the trailing \\r is not part of the evidence",
		"warning\r\n" + seedProviderLine + "\r\nbye\r\n",
		transport(connection, seedProviderLine)},
	{"ANSI colours stay in the evidence",
		"colours are ignored for matching and kept in the evidence",
		"\x1b[31mERROR:\x1b[0m API Error: 401 Unauthorized: bad key",
		other(auth, "\x1b[31mERROR:\x1b[0m API Error: 401 Unauthorized: bad key")},
	{"pi node stack trace of a missing key",
		"the thrown message, the last auth line, is the evidence",
		"            throw new Error(`No API key found for ${this.model.provider}.\\n\\n` +\n                  ^\n\nError: No API key found for mock.\n\nUse /login or set an API key environment variable. See https://github.com/badlogic/pi-mono/blob/main/packages/coding-agent/docs/providers.md\n    at AgentSession.prompt (file:///x/agent-session.js:412:19)",
		other(auth, "Error: No API key found for mock.")},
	{"retry-after header on its own line",
		"a Retry-After header printed apart from the 429 still gives the delay",
		"API Error: 429 rate_limit_error\nretry-after: 30",
		withRetry(transport(rateLimit, "API Error: 429 rate_limit_error"), 30*time.Second)},
	{"retry-after-ms header",
		"milliseconds",
		"429 rate limited\nretry-after-ms: 1500",
		withRetry(transport(rateLimit, "429 rate limited"), 1500*time.Millisecond)},
	{"no retry-after for a connection failure",
		"a header beside a connection failure is not a delay hint for it",
		"provider: connection error\nretry-after: 30",
		transport(connection, "provider: connection error")},
}

// Delay hints.
var retryAfterClassifyCases = []classifyCase{
	{"go duration", "Go's duration form", "429 rate limited, please try again in 6m0s", withRetry(transport(rateLimit, "429 rate limited, please try again in 6m0s"), 6*time.Minute)},
	{"days hours minutes", "a long quota reset", "You've hit your usage limit. Try again in 3 days 2 hours and 5 minutes.", withRetry(other(quota, "You've hit your usage limit. Try again in 3 days 2 hours and 5 minutes."), 74*time.Hour+5*time.Minute)},
	{"retry in fractional seconds", "gemini's form", "[API Error: 429 Too Many Requests. Please retry in 37.123s.]", withRetry(transport(rateLimit, "[API Error: 429 Too Many Requests. Please retry in 37.123s.]"), 37123*time.Millisecond)},
	{"retry after seconds words", "words for the unit", "API Error: rate limit exceeded, retry after 20 seconds", withRetry(transport(rateLimit, "API Error: rate limit exceeded, retry after 20 seconds"), 20*time.Second)},
	{"retry-after HTTP date", "a date is not a delay", "API Error: 429 rate limited retry-after: Wed, 21 Oct 2015 07:28:00 GMT", transport(rateLimit, "API Error: 429 rate limited retry-after: Wed, 21 Oct 2015 07:28:00 GMT")},
	{"absurd delay is capped", "the delay is bounded at 366 days", "API Error: 429 try again in 99999999999999999999 days", withRetry(transport(rateLimit, "API Error: 429 try again in 99999999999999999999 days"), 366*24*time.Hour)},
	{"unknown unit", "a number with an unknown unit is no delay", "API Error: 429 try again in 5 parsecs", transport(rateLimit, "API Error: 429 try again in 5 parsecs")},
}

// classifyGroups are the cases of TestClassifyFailure and the fuzz corpus:
// the seed's tests, then pilot's own sets.
func classifyGroups() []classifyGroup {
	return append(slices.Clone(seedClassifyGroups),
		classifyGroup{"cli", cliClassifyCases},
		classifyGroup{"strong", strongPhraseClassifyCases},
		classifyGroup{"weak", weakClassifyCases},
		classifyGroup{"multiline", multiLineClassifyCases},
		classifyGroup{"retryafter", retryAfterClassifyCases},
	)
}

// classifyAs classifies text as a dispatch with the runner named runner
// reads it from its worker's stderr: line by line through the watcher's
// Diagnose, the strongest winning. A case or fixture named after a CLI
// ("pi …", "codex-…") is that CLI's words; any other name is no runner's,
// and text is read by ClassifyFailure alone.
func classifyAs(t testing.TB, runner, text string) pilot.Classification {
	t.Helper()
	var r pilot.Runner
	for _, cand := range agents.Runners() {
		if cand.Name() == runner && runner != "command" {
			r = cand
		}
	}
	if r == nil {
		return pilot.ClassifyFailure(text)
	}
	d, err := agents.Classifier(r)
	if err != nil {
		t.Fatal(err)
	}
	c := pilot.Classification{Class: pilot.FailGeneric}
	for _, line := range strings.Split(text, "\n") {
		if lc, ok := d(pilot.Stderr, strings.TrimSuffix(line, "\r")); ok {
			c = pilot.Strongest(c, lc)
		}
	}
	return c
}

// runnerOr names who classified a case for classifyAs.
func runnerOr(runner string) string {
	for _, r := range agents.Runners() {
		if r.Name() == runner && runner != "command" {
			return runner + "'s Diagnose"
		}
	}
	return "ClassifyFailure"
}

func TestClassifyFailure(t *testing.T) {
	for _, g := range classifyGroups() {
		for _, tc := range g.cases {
			t.Run(g.name+"/"+tc.name, func(t *testing.T) {
				runner, _, _ := strings.Cut(tc.name, " ")
				got := classifyAs(t, runner, tc.text)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s: classifying %q: mismatch (-want +got):\n%s\nwhy: %s", runnerOr(runner), tc.text, diff, tc.why)
				}
			})
		}
	}
}

// The pure part of the seed's test_provider_stderr_requires_and_preserves_exact_evidence
// (TestProviderStderrRequiresAndPreservesExactEvidence dispatches it): a pi
// stderr line proves provider-connection with itself as evidence (the pi
// watcher's Diagnose gives the same: agents' TestDiagnose), and the report
// keeps the seed's keys.
func TestClassifySeedProviderStderrEvidenceReport(t *testing.T) {
	c := pilot.ClassifyFailure(seedProviderLine)
	if c.Evidence != seedProviderLine {
		t.Fatalf("ClassifyFailure(%q) = %+v; want the line itself as evidence", seedProviderLine, c)
	}
	r := report.FromClassification(c, "pi:stderr")
	r.DispatcherPID = 4242
	r.DispatcherSourceSHA256 = strings.Repeat("a", 64)
	r.DispatcherCurrentSHA256 = strings.Repeat("a", 64)
	want := []string{
		"failure_class=provider-connection",
		"failure_source=provider-terminal-diagnostic",
		"provider_transport_failure_confirmed=true",
		"failure_evidence_source=pi:stderr",
		"provider_evidence=" + seedProviderLine,
		"dispatcher_pid=4242",
		"dispatcher_source_sha256=" + strings.Repeat("a", 64),
		"dispatcher_source_current_sha256=" + strings.Repeat("a", 64),
		"dispatcher_source_matches_loaded=true",
	}
	if diff := cmp.Diff(want, r.Lines()); diff != "" {
		t.Errorf("report lines mismatch (-want +got):\n%s", diff)
	}
}

// The pure part of the seed's test_exit_143_is_process_termination_not_provider_failure
// (TestExit143IsProcessTerminationNotProviderFailure dispatches it): exit
// 143 is a termination for every runner, stands for an inferred SIGTERM, and the
// report of the termination does not confirm a provider failure even
// though stderr held a provider line.
func TestClassifySeedExit143IsTerminationNotProvider(t *testing.T) {
	for _, r := range agents.Runners() {
		p := pilot.Provider{Name: r.Name(), Runner: r.Name()}
		if r.Name() == "command" {
			p.Argv = []string{"true"}
		}
		dir := t.TempDir()
		cmd, err := r.Command(context.Background(), pilot.Attempt{
			Task: pilot.Task{Provider: p.Name, Mode: pilot.ModeReview, Prompt: "x"}, Provider: p,
			RunID: "run-1", RunDir: dir, Prompt: "x", Workdir: dir, SessionPath: filepath.Join(dir, "session"),
		})
		if err != nil {
			t.Fatalf("%s: %v", r.Name(), err)
		}
		e := pilot.Exit{Runner: r.Name(), Started: true, Code: 143}
		if res := cmd.Watcher.Finish(e); res.Class != pilot.FailProcessTerminated {
			t.Errorf("%s: exit 143 is %s %s, want process-terminated", r.Name(), res.Outcome, res.Class)
		}
	}
	sig, ok := pilot.SignalFromExitCode(143)
	if !ok || sig != syscall.SIGTERM {
		t.Fatalf("SignalFromExitCode(143) = %v, %v; want SIGTERM", sig, ok)
	}
	r := report.Failure{
		Class:                     pilot.FailProcessTerminated,
		Source:                    "process-termination",
		TerminationSignal:         "SIGTERM",
		TerminationSignalInferred: true,
		TerminationInitiator:      "unknown",
	}
	want := []string{
		"failure_class=process-terminated",
		"failure_source=process-termination",
		"provider_transport_failure_confirmed=false",
		"termination_signal=SIGTERM",
		"termination_signal_inferred=true",
		"termination_initiator=unknown",
	}
	if diff := cmp.Diff(want, r.Lines()); diff != "" {
		t.Errorf("report lines mismatch (-want +got):\n%s", diff)
	}
}

func TestClassifyRetryableAndProvider(t *testing.T) {
	tests := []struct {
		class     pilot.FailureClass
		retryable bool
		provider  bool
		why       string
	}{
		{pilot.FailProviderConnection, true, true, "transient network; seed test_retries_pi_connection_and_generic_failures retries it"},
		{pilot.FailProviderStreamDisconnect, true, true, "transient; seed test_pi_tenth_failure_blocks_without_cooldown retries it up to the budget"},
		{pilot.FailProviderRateLimit, true, true, "clears after RetryAfter"},
		{pilot.FailProviderServerError, true, true, "the provider's transient trouble"},
		{pilot.FailProviderQuota, false, true, "stays used up until it resets"},
		{pilot.FailProviderAuth, false, true, "the same key is refused again"},
		{pilot.FailContextLimit, false, false, "needs compaction or a resume, not a plain retry; the provider worked"},
		{pilot.FailSessionStall, true, false, "a policy timeout, not a provider failure (seed SKILL.md); seed retries it"},
		{pilot.FailGeneric, true, false, "nothing says it is permanent; seed retries it"},
		{pilot.FailTimeout, true, false, "the worker may only have been slow"},
		{pilot.FailIdleTimeout, true, false, "the worker may only have been stuck once"},
		{pilot.FailSpawn, false, false, "the program or setup is missing next time too"},
		{pilot.FailCancelled, false, false, "the caller asked to stop"},
		{pilot.FailProcessTerminated, false, false, "someone outside pilot killed it; exit 143 is never a provider failure"},
		{pilot.FailureClass("made-up"), false, false, "unknown classes are not retryable"},
	}
	for _, tc := range tests {
		t.Run(string(tc.class), func(t *testing.T) {
			if got := tc.class.Retryable(); got != tc.retryable {
				t.Errorf("Retryable() = %v, want %v (%s)", got, tc.retryable, tc.why)
			}
			if got := tc.class.Provider(); got != tc.provider {
				t.Errorf("Provider() = %v, want %v (%s)", got, tc.provider, tc.why)
			}
		})
	}
}

func TestClassifySignalFromExitCode(t *testing.T) {
	tests := []struct {
		name string
		code int
		sig  syscall.Signal
		ok   bool
	}{
		{"143 SIGTERM", 143, syscall.SIGTERM, true},
		{"137 SIGKILL", 137, syscall.SIGKILL, true},
		{"130 SIGINT", 130, syscall.SIGINT, true},
		{"129 SIGHUP", 129, syscall.SIGHUP, true},
		{"159 signal 31", 159, syscall.Signal(31), true},
		{"128 is not a signal", 128, 0, false},
		{"160 is past the signals", 160, 0, false},
		{"1 is an ordinary exit", 1, 0, false},
		{"-1 is a signalled process, not a code", -1, 0, false},
		{"255", 255, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sig, ok := pilot.SignalFromExitCode(tc.code)
			if sig != tc.sig || ok != tc.ok {
				t.Errorf("SignalFromExitCode(%d) = %v, %v; want %v, %v", tc.code, sig, ok, tc.sig, tc.ok)
			}
		})
	}
}

// goldenClassification is the golden files' form of a Classification.
type goldenClassification struct {
	Class              pilot.FailureClass `json:"class"`
	Evidence           string             `json:"evidence"`
	RetryAfter         string             `json:"retry_after,omitempty"`
	TransportConfirmed bool               `json:"transport_confirmed"`
}

// Each testdata/classify/*.txt is a worker's stderr; its .golden file is
// what ClassifyFailure makes of it. Regenerate with
// go test -run Golden -update-classify.
func TestClassifyFailureGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "classify", "*.txt"))
	if err != nil || len(files) < 10 {
		t.Fatalf("want at least 10 fixtures, found %d (%v)", len(files), err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txt")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			runner, _, _ := strings.Cut(name, "-")
			c := classifyAs(t, runner, string(in))
			g := goldenClassification{Class: c.Class, Evidence: c.Evidence, TransportConfirmed: c.TransportConfirmed}
			if c.RetryAfter != 0 {
				g.RetryAfter = c.RetryAfter.String()
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(g); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			golden := strings.TrimSuffix(file, ".txt") + ".golden"
			if *updateClassify {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run Golden -update-classify)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s mismatch (-want +got):\n%s", golden, diff)
			}
			if c.Evidence != "" && !containsLine(string(in), c.Evidence) {
				t.Errorf("evidence %q is not a line of %s", c.Evidence, file)
			}
		})
	}
}

// containsLine reports whether line is one of text's lines, each without
// its trailing "\r".
func containsLine(text, line string) bool {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, len(text)+1)
	for sc.Scan() {
		if strings.TrimSuffix(sc.Text(), "\r") == line {
			return true
		}
	}
	return false
}

var knownClasses = map[pilot.FailureClass]bool{
	pilot.FailTimeout: true, pilot.FailIdleTimeout: true, pilot.FailCancelled: true,
	pilot.FailSpawn: true, pilot.FailProcessTerminated: true, pilot.FailGeneric: true,
	pilot.FailProviderConnection: true, pilot.FailProviderStreamDisconnect: true,
	pilot.FailProviderRateLimit: true, pilot.FailProviderQuota: true,
	pilot.FailProviderServerError: true, pilot.FailProviderAuth: true,
	pilot.FailContextLimit: true, pilot.FailSessionStall: true,
}

func FuzzClassifyFailure(f *testing.F) {
	for _, g := range classifyGroups() {
		for _, tc := range g.cases {
			f.Add(tc.text)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "classify", "*.txt"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(string(b))
		}
	}
	f.Add("Connection error.\r\r") // evidence that ends in "\r"
	f.Fuzz(func(t *testing.T, text string) {
		c := pilot.ClassifyFailure(text)
		if !knownClasses[c.Class] {
			t.Fatalf("unknown class %q", c.Class)
		}
		if c.RetryAfter < 0 || c.RetryAfter > 366*24*time.Hour {
			t.Fatalf("RetryAfter %v out of range", c.RetryAfter)
		}
		if c.Evidence == "" {
			if c != (pilot.Classification{Class: pilot.FailGeneric}) {
				t.Fatalf("no evidence but %+v", c)
			}
			return
		}
		if strings.Contains(c.Evidence, "\n") || !isLineOf(text, c.Evidence) {
			t.Fatalf("evidence %q is not one line of the input", c.Evidence)
		}
		// Lines are judged on their own: the evidence alone proves the
		// same class. The "\r" is stripped again, so the line read is
		// exactly the evidence even when it ends in "\r" itself.
		if alone := pilot.ClassifyFailure(c.Evidence + "\r"); alone.Class != c.Class || alone.Evidence != c.Evidence {
			t.Fatalf("evidence %q alone gives %+v, in its text %+v", c.Evidence, alone, c)
		}
		if c.TransportConfirmed && !c.Class.Provider() {
			t.Fatalf("transport confirmed for %s", c.Class)
		}
	})
}

// isLineOf reports whether line is one of text's "\n"-separated lines after
// its trailing "\r" is stripped.
func isLineOf(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSuffix(l, "\r") == line {
			return true
		}
	}
	return false
}

func ExampleClassifyFailure() {
	stderr := "unrelated warning\n" +
		"provider_tunnel_error: dial tcp 192.0.2.1:8001: connect: connection refused\n"
	c := pilot.ClassifyFailure(stderr)
	fmt.Println(c.Class, c.Class.Retryable(), c.TransportConfirmed)
	fmt.Println(c.Evidence)

	weak := pilot.ClassifyFailure("dial tcp 127.0.0.1:9999: connect: connection refused")
	fmt.Printf("%s %q\n", weak.Class, weak.Evidence)
	// Output:
	// provider-connection true true
	// provider_tunnel_error: dial tcp 192.0.2.1:8001: connect: connection refused
	// generic-error ""
}

// BenchmarkClassifyFailureLine is the cost of classifying one stderr line,
// which the Dispatcher pays for every diagnostic line.
func BenchmarkClassifyFailureLine(b *testing.B) {
	lines := []string{
		seedProviderLine,
		"dial tcp 127.0.0.1:9999: connect: connection refused",
		"    client_test.go:41: ok",
		"internal/api/server.go:10: context deadline exceeded",
		`API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
	}
	for _, line := range lines {
		b.Run(line[:min(len(line), 24)], func(b *testing.B) {
			for b.Loop() {
				pilot.ClassifyFailure(line)
			}
		})
	}
}
