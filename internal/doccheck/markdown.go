package doccheck

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// CodeBlock is one fenced code block of a Markdown document.
type CodeBlock struct {
	// Lang is the fence's info string's first word ("sh", "json", "").
	Lang string
	// Line is the 1-based line of the block's first content line.
	Line int
	// Lines are the block's content lines.
	Lines []string
}

// CodeSpan is one inline code span (`like this`) outside fenced blocks.
type CodeSpan struct {
	Line int
	Text string
}

// Link is one link target written in a Markdown document: an inline link
// or image, a reference definition, or an HTML href or src.
type Link struct {
	Line   int
	Target string
}

// Doc is a scanned Markdown document.
type Doc struct {
	// Blocks are the fenced code blocks, in order.
	Blocks []CodeBlock
	// Spans are the inline code spans, in order.
	Spans []CodeSpan
	// Links are the link targets outside code, in order.
	Links []Link
	// Anchors are the fragments the document defines: its headings' GitHub
	// slugs (with -1, -2 ... for repeats) and explicit id/name anchors.
	Anchors map[string]bool
	// Headings are the slugs in document order (for messages).
	Headings []string
}

var (
	fenceRE   = regexp.MustCompile("^\\s*(`{3,}|~{3,})\\s*([^\\s`]*)")
	atxRE     = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextRE  = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	refDefRE  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]\n]+\]:[ \t]*<?([^\s>]+)>?`)
	htmlRefRE = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*"([^"]*)"`)
	htmlIDRE  = regexp.MustCompile(`(?i)<[a-z][^>]*\b(?:id|name)\s*=\s*"([^"]+)"`)
	tagRE     = regexp.MustCompile(`<[^>]*>`)
	inlineRE  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// Parse scans a Markdown document: its fenced code blocks, inline code
// spans, links and anchors. It follows CommonMark where the repository's
// documents need it (fences, code spans across line breaks, ATX and setext
// headings) and GitHub for heading anchors.
func Parse(src []byte) *Doc {
	d := &Doc{Anchors: map[string]bool{}}
	lines := strings.Split(strings.ReplaceAll(string(src), "\r\n", "\n"), "\n")
	prose := make([]string, len(lines)) // the lines with fenced blocks blanked
	var open *CodeBlock
	var fence string
	for i, l := range lines {
		if open != nil {
			if m := fenceRE.FindStringSubmatch(l); m != nil && m[1][0] == fence[0] && len(m[1]) >= len(fence) &&
				strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), string(fence[0]))) == "" {
				d.Blocks = append(d.Blocks, *open)
				open = nil
				continue
			}
			open.Lines = append(open.Lines, l)
			continue
		}
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			open, fence = &CodeBlock{Lang: strings.ToLower(m[2]), Line: i + 2}, m[1]
			continue
		}
		prose[i] = l
	}
	if open != nil { // an unclosed fence runs to the end of the document
		d.Blocks = append(d.Blocks, *open)
	}
	d.headings(prose)
	text, spans := codeSpans(strings.Join(prose, "\n"))
	d.Spans = spans
	d.Links = links(text)
	for _, m := range htmlIDRE.FindAllStringSubmatch(text, -1) {
		d.Anchors[m[1]] = true
	}
	return d
}

// headings records the anchors of the ATX and setext headings among the
// prose lines (fenced blocks are blank there).
func (d *Doc) headings(prose []string) {
	seen := map[string]int{}
	add := func(text string) {
		s := Slug(text)
		if n, ok := seen[s]; ok {
			seen[s] = n + 1
			s = fmt.Sprintf("%s-%d", s, n+1)
		} else {
			seen[s] = 0
		}
		d.Anchors[s] = true
		d.Headings = append(d.Headings, s)
	}
	for i, l := range prose {
		if m := atxRE.FindStringSubmatch(l); m != nil {
			add(m[2])
			continue
		}
		// A setext underline under a paragraph line (not a table row, list
		// item or another heading).
		if i > 0 && setextRE.MatchString(l) {
			prev := strings.TrimSpace(prose[i-1])
			if prev != "" && !strings.Contains(prev, "|") && !atxRE.MatchString(prose[i-1]) &&
				!strings.HasPrefix(prev, "- ") && !strings.HasPrefix(prev, "* ") && (i < 2 || strings.TrimSpace(prose[i-2]) == "" || atxRE.MatchString(prose[i-2])) {
				add(prev)
			}
		}
	}
}

// Slug is the anchor GitHub gives a heading: its rendered text (inline
// code kept verbatim, links and HTML reduced to their text, emphasis
// markers dropped) lower-cased, every character that is not a letter, a
// digit, a mark, a space, '-' or '_' removed, and each space turned into
// '-'.
func Slug(heading string) string {
	t := tagRE.ReplaceAllString(heading, "")
	t = inlineRE.ReplaceAllString(t, "$1")
	var rendered strings.Builder
	for i, part := range strings.Split(t, "`") {
		if i%2 == 1 { // inside a code span
			rendered.WriteString(part)
			continue
		}
		rendered.WriteString(dropEmphasis(part))
	}
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(rendered.String())) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// dropEmphasis removes emphasis markers from prose: every '*', "~~", and
// the underscores at a word's edge ("_word_"); underscores inside a word
// (snake_case) stay.
func dropEmphasis(s string) string {
	s = strings.NewReplacer("*", "", "~~", "").Replace(s)
	runes := []rune(s)
	var b strings.Builder
	for i, r := range runes {
		if r == '_' {
			inside := i > 0 && i < len(runes)-1 && isWord(runes[i-1]) && isWord(runes[i+1])
			if !inside {
				continue
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// codeSpans finds the inline code spans of text (CommonMark: a run of n
// backticks up to the next run of exactly n, within a paragraph) and
// returns text with each span replaced by as many 'x' (line breaks kept,
// so offsets and line numbers stay), and the spans.
func codeSpans(text string) (string, []CodeSpan) {
	b := []byte(text)
	var spans []CodeSpan
	for i := 0; i < len(b); {
		if b[i] == '\\' && i+1 < len(b) {
			i += 2
			continue
		}
		if b[i] != '`' {
			i++
			continue
		}
		n := runLen(b, i, '`')
		end := closeSpan(b, i+n, n)
		if end < 0 {
			i += n // a literal run of backticks
			continue
		}
		content := string(b[i+n : end])
		content = strings.TrimSpace(strings.ReplaceAll(content, "\n", " "))
		spans = append(spans, CodeSpan{Line: 1 + bytes.Count(b[:i], []byte("\n")), Text: content})
		for j := i; j < end+n; j++ {
			if b[j] != '\n' {
				b[j] = 'x'
			}
		}
		i = end + n
	}
	return string(b), spans
}

func runLen(b []byte, i int, c byte) int {
	n := 0
	for i+n < len(b) && b[i+n] == c {
		n++
	}
	return n
}

// closeSpan finds the run of exactly n backticks that closes a span opened
// before from, stopping at a blank line (the paragraph's end); -1 if none.
func closeSpan(b []byte, from, n int) int {
	for j := from; j < len(b); {
		if b[j] == '\n' {
			k := j + 1
			for k < len(b) && (b[k] == ' ' || b[k] == '\t') {
				k++
			}
			if k >= len(b) || b[k] == '\n' {
				return -1
			}
		}
		if b[j] != '`' {
			j++
			continue
		}
		m := runLen(b, j, '`')
		if m == n {
			return j
		}
		j += m
	}
	return -1
}

// links finds the link targets in text (code already blanked): inline
// links and images "](target)", reference definitions and HTML href/src
// attributes.
func links(text string) []Link {
	var out []Link
	lineAt := func(off int) int { return 1 + strings.Count(text[:off], "\n") }
	for i := 0; i+1 < len(text); i++ {
		if text[i] != ']' || text[i+1] != '(' || (i > 0 && text[i-1] == '\\') {
			continue
		}
		if t, ok := destination(text[i+2:]); ok {
			out = append(out, Link{Line: lineAt(i), Target: t})
		}
	}
	for _, m := range refDefRE.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, Link{Line: lineAt(m[0]), Target: text[m[2]:m[3]]})
	}
	for _, m := range htmlRefRE.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, Link{Line: lineAt(m[0]), Target: text[m[2]:m[3]]})
	}
	return out
}

// destination reads a link destination at the start of s (just after
// "]("): <...>, or up to whitespace or the ")" that balances.
func destination(s string) (string, bool) {
	s = strings.TrimLeft(s, " \t")
	if strings.HasPrefix(s, "<") {
		end := strings.IndexAny(s, ">\n")
		if end < 0 || s[end] != '>' {
			return "", false
		}
		return s[1:end], true
	}
	depth := 0
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth == 0:
			return s[:i], i > 0
		case r == ')':
			depth--
		case r == ' ' || r == '\t' || r == '\n':
			return s[:i], i > 0
		}
	}
	return "", false
}
