package cli

import (
	"flag"
	"fmt"
	"math"
	"strconv"
)

// usd is a flag of a positive amount of US dollars.
type usd struct{ v *float64 }

func (u usd) String() string {
	if u.v == nil || *u.v == 0 {
		return ""
	}
	return strconv.FormatFloat(*u.v, 'f', -1, 64)
}

func (u usd) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("want a positive amount of US dollars (0.50, 12), got %q", s)
	}
	*u.v = f
	return nil
}

// tokens is a flag of a positive number of tokens.
type tokens struct{ v *int64 }

func (t tokens) String() string {
	if t.v == nil || *t.v == 0 {
		return ""
	}
	return strconv.FormatInt(*t.v, 10)
}

func (t tokens) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("want a positive number of tokens, got %q", s)
	}
	*t.v = n
	return nil
}

// taskBudgetFlags adds --max-tokens and --max-cost-usd, one worker's caps.
func taskBudgetFlags(fs *flagSet, maxTokens *int64, maxCost *float64) {
	fs.Var(tokens{maxTokens}, "max-tokens", "end the worker as budget-exceeded once its stream reports more than `N` tokens (pi, opencode, claude)")
	fs.Var(usd{maxCost}, "max-cost-usd", "end the worker as budget-exceeded once its stream reports more than `USD` spent (pi, opencode)")
}

// totalBudgetFlag adds --max-cost-usd, a fanout's or graph's bound.
func totalBudgetFlag(fs *flagSet, what string, maxCost *float64) {
	fs.Var(usd{maxCost}, "max-cost-usd", "start no further job once the "+what+"'s finished jobs have spent `USD` (the rest end skipped; running ones finish)")
}

// jobBudget reads a job's own "max_tokens" and "max_cost_usd" from a jobs
// or graph file entry, as JSON numbers.
func jobBudget(obj map[string]any) (maxTokens int64, maxCost float64, err error) {
	if v, ok := obj["max_tokens"]; ok {
		f, ok := v.(float64)
		if !ok || f <= 0 || f != math.Trunc(f) || f > 1<<53 {
			return 0, 0, fmt.Errorf("max_tokens must be a positive whole number, got %v", v)
		}
		maxTokens = int64(f)
	}
	if v, ok := obj["max_cost_usd"]; ok {
		f, ok := v.(float64)
		if !ok || f <= 0 || math.IsInf(f, 0) {
			return 0, 0, fmt.Errorf("max_cost_usd must be a positive number of US dollars, got %v", v)
		}
		maxCost = f
	}
	return maxTokens, maxCost, nil
}

var _ flag.Value = usd{}
