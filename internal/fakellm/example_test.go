package fakellm_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pilotworkers/pilot/internal/fakellm"
)

func ExampleServer() {
	s := fakellm.New(fakellm.Script{Model: "m1", Steps: []fakellm.Step{
		fakellm.Tools(fakellm.Bash("Bash", "ls")),
		fakellm.RateLimited("1").Forever(),
	}})
	defer s.Close()

	ask := func() {
		resp, err := http.Post(s.URL()+"/v1/messages", "application/json",
			strings.NewReader(`{"model":"m1","stream":false}`))
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		var m struct {
			StopReason string `json:"stop_reason"`
			Content    []struct {
				Name  string
				Input map[string]string
			}
			Error struct{ Type string }
		}
		json.NewDecoder(resp.Body).Decode(&m)
		switch resp.StatusCode {
		case 200:
			fmt.Println(m.StopReason, m.Content[0].Name, m.Content[0].Input["command"])
		default:
			fmt.Println(resp.StatusCode, m.Error.Type, "retry-after", resp.Header.Get("Retry-After"))
		}
	}
	ask()
	ask()
	ask()
	for _, r := range s.Requests() {
		fmt.Println(r.Method, r.Path, "turn", r.Turn, "step", r.Step)
	}
	// Output:
	// tool_use Bash ls
	// 429 rate_limit_error retry-after 1
	// 429 rate_limit_error retry-after 1
	// POST /v1/messages turn 1 step 0
	// POST /v1/messages turn 2 step 1
	// POST /v1/messages turn 3 step 1
}

func ExampleGeminiRouter() {
	s := fakellm.New(fakellm.Script{
		Steps: []fakellm.Step{fakellm.Tools(fakellm.Bash("run_shell_command", "ls"))},
		Aside: fakellm.GeminiRouter,
	})
	defer s.Close()

	ask := func(path, body string) string {
		resp, err := http.Post(s.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// gemini-cli's routing request is answered aside...
	route := ask("/v1beta/models/gemini-3.5-flash-lite:generateContent",
		`{"systemInstruction":{"parts":[{"text":"\nYou are a specialized Task Routing AI."}]}}`)
	var r struct {
		Candidates []struct {
			Content struct{ Parts []struct{ Text string } }
		}
	}
	json.Unmarshal([]byte(route), &r)
	fmt.Println(r.Candidates[0].Content.Parts[0].Text)
	// ...and the turn takes the script's step, streamed as SSE data lines.
	for _, line := range strings.Split(ask("/v1beta/models/fake-model:streamGenerateContent?alt=sse", `{}`), "\n") {
		if line != "" {
			fmt.Println(line)
		}
	}
	// Output:
	// {"reasoning":"fakellm","model_choice":"flash","complexity_reasoning":"fakellm","complexity_score":10}
	// data: {"candidates":[{"content":{"parts":[{"functionCall":{"args":{"command":"ls"},"name":"run_shell_command"}}],"role":"model"},"index":0}],"modelVersion":"fake-model","responseId":"gemini_1"}
	// data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"modelVersion":"fake-model","responseId":"gemini_1","usageMetadata":{"cachedContentTokenCount":0,"candidatesTokenCount":20,"promptTokenCount":100,"totalTokenCount":120}}
}
