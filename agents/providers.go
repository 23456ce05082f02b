package agents

import (
	"slices"
	"strings"

	"github.com/pilotworkers/pilot"
)

// Providers returns pilot's built-in providers, sorted by name. It
// keeps pilot-workers' names where they exist: glm and kimi-k3 run through
// opencode with a model and key of their own. The others run each agent
// CLI on its default model:
//
//	name     runner    model                     credential_env
//	claude   claude    (the CLI's default)       ANTHROPIC_API_KEY
//	codex    codex     (the CLI's default)       CODEX_API_KEY
//	gemini   gemini    (the CLI's default)       GEMINI_API_KEY
//	glm      opencode  zai-coding-plan/glm-5.2   ZHIPU_API_KEY
//	kimi-k3  opencode  moonshotai/kimi-k3        MOONSHOT_API_KEY
//	pi       pi        (the CLI's default)       (none: pi's own login and settings)
//	qwen     qwen      (the CLI's default)       (none: qwen's own settings and login)
//
// The opencode models are opencode's provider/model ids; opencode reads the
// key from the variable named. codex exec reads CODEX_API_KEY for one
// invocation (OPENAI_API_KEY alone does not log codex in). A provider with
// a credential_env needs that credential: to use a CLI's own login instead
// (a Claude or ChatGPT subscription), define the provider again in the
// providers file without credential_env; to use another model, define it
// again with that model. A providers file entry replaces the built-in one
// of the same name whole.
//
// Each call returns a fresh slice the caller may change.
func Providers() []pilot.Provider {
	var ps []pilot.Provider
	for _, p := range [][]pilot.Provider{claudeProviders, codexProviders, geminiProviders, opencodeProviders, piProviders, qwenProviders} {
		ps = append(ps, p...)
	}
	slices.SortFunc(ps, func(a, b pilot.Provider) int { return strings.Compare(a.Name, b.Name) })
	return ps
}
