package iostreams

import "testing"

func TestColorFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		tty  bool
		want bool
	}{
		{"terminal", nil, true, true},
		{"pipe", nil, false, false},
		{"NO_COLOR on a terminal", map[string]string{"NO_COLOR": "1"}, true, false},
		{"NO_COLOR beats CLICOLOR_FORCE", map[string]string{"NO_COLOR": "1", "CLICOLOR_FORCE": "1"}, true, false},
		{"CLICOLOR_FORCE on a pipe", map[string]string{"CLICOLOR_FORCE": "1"}, false, true},
		{"CLICOLOR_FORCE=0 is not forcing", map[string]string{"CLICOLOR_FORCE": "0"}, false, false},
		{"CLICOLOR_FORCE beats TERM=dumb", map[string]string{"CLICOLOR_FORCE": "1", "TERM": "dumb"}, false, true},
		{"TERM=dumb", map[string]string{"TERM": "dumb"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := func(k string) string { return tt.env[k] }
			if got := ColorFromEnv(env, tt.tty); got != tt.want {
				t.Errorf("ColorFromEnv = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTestStreams(t *testing.T) {
	ios, _, out, errOut := Test()
	if ios.ColorEnabled() || ios.CanPrompt() || ios.IsStdoutTTY() || ios.IsStdinTTY() {
		t.Fatal("test streams must be plain, non-interactive")
	}
	_, _ = ios.Out.Write([]byte("data"))
	_, _ = ios.ErrOut.Write([]byte("note"))
	if out.String() != "data" || errOut.String() != "note" {
		t.Fatalf("buffers not wired: out=%q err=%q", out, errOut)
	}
	ios.SetStdinTTY(true)
	if ios.CanPrompt() {
		t.Fatal("CanPrompt needs stdout on a terminal too")
	}
	ios.SetStdoutTTY(true)
	if !ios.CanPrompt() {
		t.Fatal("CanPrompt with both terminals")
	}
}
