package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// camel is a seed test's Go name: test_exit_143_is_x -> Exit143IsX.
func camel(name string) string {
	var b strings.Builder
	for _, w := range strings.Split(strings.TrimPrefix(name, "test_"), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// TestEverySeedTestHasAGoTest keeps issue 17's promise: every test of the
// seed's classes it names has a Go test, or a subtest, of its name in this
// module.
func TestEverySeedTestHasAGoTest(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "seed-tests.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var corpus strings.Builder
	root := filepath.Join("..", "..")
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") && !strings.HasSuffix(path, "seedtests_test.go") {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			corpus.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	text := corpus.String()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		class, name, _ := strings.Cut(line, " ")
		n++
		go1 := camel(name)
		fn := regexp.MustCompile(`func Test` + regexp.QuoteMeta(go1) + `\(`)
		if !fn.MatchString(text) && !strings.Contains(text, `"`+go1+`"`) && !strings.Contains(text, `"`+go1+`/`) {
			t.Errorf("%s.%s has no Go test Test%s (nor a subtest %q)", class, name, go1, go1)
		}
	}
	if n < 80 {
		t.Errorf("only %d seed tests listed", n)
	}
}
