package fakellm_test

import (
	"encoding/json"
	"fmt"
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
