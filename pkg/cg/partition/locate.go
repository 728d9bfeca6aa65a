package partition

// OtherSplit returns a different split of the tokens' concatenation into
// as many non-empty tokens, which therefore hashes alike: one character
// moved across a boundary. ok is false when there is none (one token, or
// every token a single character).
func OtherSplit(tokens []string) (split []string, ok bool) {
	if len(tokens) < 2 {
		return nil, false
	}
	for i, t := range tokens {
		if len(t) < 2 {
			continue
		}
		out := append([]string(nil), tokens...)
		if i+1 < len(tokens) {
			out[i], out[i+1] = t[:len(t)-1], t[len(t)-1:]+tokens[i+1]
		} else {
			out[i-1], out[i] = tokens[i-1]+t[:1], t[1:]
		}
		return out, true
	}
	return nil, false
}
