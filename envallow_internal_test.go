package pilot

import "testing"

func TestSecretLooking(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		// Suffixes.
		{"OPENAI_API_KEY", true},
		{"API_KEY", true},
		{"openai_api_key", true},
		{"MINIO_ACCESS_KEY", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"SECRET_KEY", true},
		{"COSIGN_PRIVATE_KEY", true},
		{"NPM_TOKEN", true},
		{"ANTHROPIC_AUTH_TOKEN", true},
		{"GOOGLE_CLIENT_SECRET", true},
		{"POSTGRES_PASSWORD", true},
		// Well-known names.
		{"AWS_ACCESS_KEY_ID", true},
		{"AWS_SESSION_TOKEN", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", true},
		{"AZURE_CLIENT_SECRET", true},
		{"GH_TOKEN", true},
		{"GITHUB_TOKEN", true},
		{"github_token", true},
		{"PGPASSWORD", true},
		{"MYSQL_PWD", true},
		// Not secrets: a suffix must be whole words, and a bare _KEY
		// names no secret.
		{"PATH", false},
		{"EDITOR", false},
		{"GPG_KEY", false},
		{"OTHER_KEY", false},
		{"MONKEY", false},
		{"TOKENIZERS_PARALLELISM", false},
		{"MYTOKEN", false},
		{"SECRETARY", false},
		{"AWS_REGION", false},
		{"PILOT_RUN_ID", false},
	}
	for _, tt := range tests {
		if got := secretLooking(tt.name); got != tt.want {
			t.Errorf("secretLooking(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	for _, k := range defaultEnvAllow {
		if secretLooking(k) {
			t.Errorf("the default allowlist holds %s, which looks like a secret", k)
		}
	}
}
