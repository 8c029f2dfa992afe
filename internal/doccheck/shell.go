package doccheck

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// Word is one word of a shell command line, or an operator.
type Word struct {
	// Text is the word after quote removal, or the operator ("|", "&&", ";" ...).
	Text string
	// Op marks a control or redirection operator.
	Op bool
	// Expands marks a word with a '$' outside single quotes: the shell
	// would expand it, so its text is not what the command receives.
	Expands bool
}

// ErrUnterminated is returned by Words for a line whose quotes do not close.
var ErrUnterminated = errors.New("unterminated quote")

// Words splits one shell command line (continuations already joined) into
// words and operators, as POSIX sh does for the forms the docs use: single
// quotes, double quotes with their backslash escapes, backslash escapes,
// and a comment from an unquoted '#' at the start of a word. It returns the
// comment's text (without '#') separately.
func Words(line string) (words []Word, comment string, err error) {
	var cur strings.Builder
	inWord, expands := false, false
	flush := func() {
		if inWord {
			words = append(words, Word{Text: cur.String(), Expands: expands})
		}
		cur.Reset()
		inWord, expands = false, false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			flush()
		case c == '#' && !inWord:
			return words, strings.TrimSpace(line[i+1:]), nil
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, "", ErrUnterminated
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '"':
			inWord = true
			for i++; ; i++ {
				if i >= len(line) {
					return nil, "", ErrUnterminated
				}
				if line[i] == '"' {
					break
				}
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("$`\"\\\n", line[i+1]) >= 0 {
					i++
				} else if line[i] == '$' || line[i] == '`' {
					expands = true
				}
				cur.WriteByte(line[i])
			}
		case c == '\\':
			if i+1 < len(line) {
				i++
				cur.WriteByte(line[i])
				inWord = true
			}
		case strings.IndexByte("|&;()<>", c) >= 0:
			flush()
			op := string(c)
			if i+1 < len(line) && (line[i+1] == c && c != '(' && c != ')' || c == '>' && line[i+1] == '&') {
				op += string(line[i+1])
				i++
			}
			words = append(words, Word{Text: op, Op: true})
		default:
			if c == '$' || c == '`' {
				expands = true
			}
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, "", nil
}

// Commands splits words at control operators into simple commands, each
// without its leading VAR=value assignments; redirections and what follows
// them stay in the command.
func Commands(words []Word) [][]Word {
	var out [][]Word
	var cur []Word
	for _, w := range words {
		if w.Op && w.Text != ">" && w.Text != ">>" && w.Text != "<" && w.Text != ">&" {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		if len(cur) == 0 && !w.Op && isAssignment(w.Text) {
			continue
		}
		cur = append(cur, w)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func isAssignment(s string) bool { return assignRE.MatchString(s) }

// LogicalLines joins a code block's lines ending in a backslash with the
// next ones, and drops a leading "$ " prompt. Each result carries the
// line number (in the document) of its first line.
func LogicalLines(b CodeBlock) []NumberedLine {
	var out []NumberedLine
	for i := 0; i < len(b.Lines); i++ {
		start := i
		l := b.Lines[i]
		for strings.HasSuffix(strings.TrimRight(l, " \t"), "\\") && i+1 < len(b.Lines) {
			l = strings.TrimSuffix(strings.TrimRight(l, " \t"), "\\") + " " + strings.TrimSpace(b.Lines[i+1])
			i++
		}
		t := strings.TrimSpace(l)
		t = strings.TrimPrefix(t, "$ ")
		out = append(out, NumberedLine{Line: b.Line + start, Text: t})
	}
	return out
}

// NumberedLine is a logical line of a code block and where it starts.
type NumberedLine struct {
	Line int
	Text string
}

// MakeTargets returns the targets of every `make` command in the
// document's code: fenced blocks and inline code spans. A word after
// "make" that is a flag or a VAR=value assignment is no target.
func MakeTargets(d *Doc) []Named {
	var out []Named
	scan := func(line int, text string) {
		words, _, err := Words(text)
		if err != nil {
			return // not shell (a Go or JSON line with a lone quote)
		}
		for _, cmd := range Commands(words) {
			if cmd[0].Text != "make" || cmd[0].Op {
				continue
			}
			for _, w := range cmd[1:] {
				if w.Op {
					break
				}
				if strings.HasPrefix(w.Text, "-") || isAssignment(w.Text) {
					continue
				}
				out = append(out, Named{Line: line, Name: w.Text})
			}
		}
	}
	for _, b := range d.Blocks {
		for _, l := range LogicalLines(b) {
			scan(l.Line, l.Text)
		}
	}
	for _, s := range d.Spans {
		scan(s.Line, s.Text)
	}
	return out
}

// Named is a name found at a line of a document.
type Named struct {
	Line int
	Name string
}

// Step is one checked step of a document's curl examples: a curl command
// and the status code the document says it answers, or a wait until a
// read's answer contains a word.
type Step struct {
	// Line is where the step starts in the document.
	Line int
	// Args are curl's arguments (without "curl").
	Args []string
	// Want is the documented status code (0 for a wait).
	Want int
	// Answer is the rest of the documented answer's comment (after the
	// status): what the document shows of the body.
	Answer string
	// WaitFor, for a wait ("until curl ARGS | grep -q WORD; do ...; done"),
	// is the word the read's answer must contain.
	WaitFor string
}

var wantRE = regexp.MustCompile(`^([1-5][0-9]{2})\b`)

// CurlSteps extracts the curl examples of a document's shell code blocks.
// The documented status of a curl command is a comment that starts with
// the 3-digit code, either after the command on its own line
// ("curl ... # 201 granted") or on the next line ("# 409 in_doubt"). A
// loop "until curl ARGS | grep -q WORD; do sleep N; done" is a wait: the
// check reads until the answer contains WORD. Any other use of curl, a
// curl command without a documented status, or one whose words the shell
// would expand ($VAR), is an error: every example must be checkable.
func CurlSteps(d *Doc) ([]Step, error) {
	var steps []Step
	var errs []error
	for _, b := range d.Blocks {
		if !shellLang(b.Lang) {
			continue
		}
		lines := LogicalLines(b)
		for i, l := range lines {
			words, comment, err := Words(l.Text)
			if err != nil {
				if strings.Contains(l.Text, "curl ") {
					errs = append(errs, fmt.Errorf("line %d: %w", l.Line, err))
				}
				continue
			}
			cmds := Commands(words)
			if len(cmds) == 0 || !usesCurl(cmds) {
				continue
			}
			if s, ok := waitStep(l.Line, words); ok {
				steps = append(steps, s)
				continue
			}
			if len(cmds) != 1 || cmds[0][0].Text != "curl" {
				errs = append(errs, fmt.Errorf("line %d: a curl example must be one curl command (or an until-grep wait): %q", l.Line, l.Text))
				continue
			}
			args, err := literal(cmds[0][1:])
			if err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", l.Line, err))
				continue
			}
			want, answer := 0, ""
			if m := wantRE.FindStringSubmatch(comment); m != nil {
				want, _ = strconv.Atoi(m[1])
				answer = strings.TrimSpace(comment[len(m[1]):])
			} else if i+1 < len(lines) && strings.HasPrefix(lines[i+1].Text, "#") {
				next := strings.TrimSpace(strings.TrimPrefix(lines[i+1].Text, "#"))
				if m := wantRE.FindStringSubmatch(next); m != nil {
					want, _ = strconv.Atoi(m[1])
					answer = strings.TrimSpace(next[len(m[1]):])
				}
			}
			if want == 0 {
				errs = append(errs, fmt.Errorf("line %d: curl example without a documented status (a comment starting with it, e.g. \"# 201 granted\")", l.Line))
				continue
			}
			steps = append(steps, Step{Line: l.Line, Args: args, Want: want, Answer: answer})
		}
	}
	return steps, errors.Join(errs...)
}

func shellLang(lang string) bool {
	switch lang {
	case "sh", "bash", "shell", "console", "zsh":
		return true
	}
	return false
}

func usesCurl(cmds [][]Word) bool {
	for _, c := range cmds {
		for _, w := range c {
			if w.Text == "curl" && !w.Op {
				return true
			}
		}
	}
	return false
}

// waitStep recognizes "until curl ARGS | grep -q WORD ; do ... ; done".
func waitStep(line int, words []Word) (Step, bool) {
	if len(words) < 6 || words[0].Text != "until" || words[1].Text != "curl" {
		return Step{}, false
	}
	pipe := -1
	for i, w := range words {
		if w.Op && w.Text == "|" {
			pipe = i
			break
		}
	}
	if pipe < 0 || pipe+3 >= len(words) || words[pipe+1].Text != "grep" || words[pipe+2].Text != "-q" {
		return Step{}, false
	}
	args, err := literal(words[2:pipe])
	if err != nil || words[pipe+3].Op {
		return Step{}, false
	}
	return Step{Line: line, Args: args, WaitFor: words[pipe+3].Text}, true
}

// literal returns the words' texts, refusing operators and expansions.
func literal(ws []Word) ([]string, error) {
	var out []string
	for _, w := range ws {
		if w.Op {
			return nil, fmt.Errorf("curl example with a redirection or operator %q", w.Text)
		}
		if w.Expands {
			return nil, fmt.Errorf("curl example with a shell expansion in %q: write the literal value", w.Text)
		}
		out = append(out, w.Text)
	}
	return out, nil
}

// Request is the HTTP request a curl command line sends.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   string
}

// CurlRequest reads the curl arguments the docs use into the request curl
// sends: -s/-S/-i/-f/-v in any combination, -X/--request, -H/--header,
// -d/--data/--data-raw/--data-binary (inline only), and one URL (http://
// when it names no scheme). Anything else is an error, so an example the
// check cannot reproduce is reported rather than misread.
func CurlRequest(args []string) (*Request, error) {
	r := &Request{Header: http.Header{}}
	var data []string
	next := func(i *int, flag string) (string, error) {
		if *i+1 >= len(args) {
			return "", fmt.Errorf("curl %s needs a value", flag)
		}
		*i++
		return args[*i], nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var err error
		var v string
		switch {
		case a == "-X" || a == "--request":
			v, err = next(&i, a)
			r.Method = v
		case strings.HasPrefix(a, "-X") && len(a) > 2:
			r.Method = a[2:]
		case a == "-H" || a == "--header":
			if v, err = next(&i, a); err == nil {
				name, value, ok := strings.Cut(v, ":")
				if !ok {
					return nil, fmt.Errorf("curl header %q has no ':'", v)
				}
				r.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
			}
		case a == "-d" || a == "--data" || a == "--data-raw" || a == "--data-binary":
			if v, err = next(&i, a); err == nil {
				if strings.HasPrefix(v, "@") && a != "--data-raw" {
					return nil, fmt.Errorf("curl %s %s reads a file: write the body inline", a, v)
				}
				data = append(data, v)
			}
		case a == "--silent" || a == "--show-error" || a == "--include" || a == "--fail" || a == "--verbose":
		case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 1 && strings.Trim(a[1:], "sSifv") == "":
		case strings.HasPrefix(a, "-"):
			return nil, fmt.Errorf("curl option %s is not one the doc check reproduces", a)
		default:
			if r.URL != "" {
				return nil, fmt.Errorf("curl with two URLs: %s and %s", r.URL, a)
			}
			r.URL = a
		}
		if err != nil {
			return nil, err
		}
	}
	if r.URL == "" {
		return nil, errors.New("curl without a URL")
	}
	if !strings.Contains(r.URL, "://") {
		r.URL = "http://" + r.URL
	}
	if data != nil {
		r.Body = strings.Join(data, "&")
		if r.Header.Get("Content-Type") == "" {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if r.Method == "" {
		r.Method = http.MethodGet
		if data != nil {
			r.Method = http.MethodPost
		}
	}
	return r, nil
}
