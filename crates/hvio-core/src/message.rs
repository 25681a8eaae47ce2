//! Error messages that point at the fix and stay short: "did you mean" for
//! a name nobody knows (the closest known one, as fio and git suggest), and
//! quoted input cut to a few hundred bytes.

/// The most bytes of a user's input an error message quotes.
pub const MAX_QUOTED_BYTES: usize = 200;

/// The known name closest to `word` by edit distance, when it is close
/// enough to be a slip: at most half the word's length, as fio's
/// `string_distance_ok`. Ties go to the first.
pub fn did_you_mean<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = word.chars().count().div_ceil(2);
    let (d, k) = known
        .into_iter()
        .map(|k| (strsim::levenshtein(word, k), k))
        .min_by_key(|&(d, _)| d)?;
    (d > 0 && d <= limit).then_some(k)
}

/// `"; did you mean `x`?"`, or nothing when no known name is close.
pub fn hint<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    did_you_mean(word, known).map_or_else(String::new, |k| format!("; did you mean `{k}`?"))
}

/// `text` cut to at most [`MAX_QUOTED_BYTES`] (on a character boundary),
/// saying how much was left out.
pub fn shorten(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_QUOTED_BYTES {
        return text.into();
    }
    let mut end = MAX_QUOTED_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len()).into()
}

/// `message` with each of `quoted` (pieces of the user's input it may
/// repeat, raw or `{:?}`-quoted) cut by [`shorten`].
pub fn cut_quotes(message: &str, quoted: &[&str]) -> String {
    let mut m = message.to_string();
    for q in quoted.iter().filter(|q| q.len() > MAX_QUOTED_BYTES) {
        m = m.replace(q, &shorten(q));
    }
    m
}

/// `message` with every word (a run between spaces) longer than
/// [`MAX_QUOTED_BYTES`] cut by [`shorten`]: the last guard, where a message
/// is printed, against a value quoted whole (a 300 kB VM name).
pub fn cut_long_words(message: &str) -> String {
    if message.len() <= MAX_QUOTED_BYTES {
        return message.to_string();
    }
    message.split(' ').map(shorten).collect::<Vec<_>>().join(" ")
}

/// A serde/toml error message made to point at the fix: every line cut by
/// [`shorten`] (toml quotes the whole offending line, however long), and an
/// unknown field or variant followed by the closest expected one.
pub fn tidy_serde_error(message: &str) -> String {
    // A caret line under a long quoted line points past the quote: dropped.
    let caret_past_quote = |l: &str| l.len() > MAX_QUOTED_BYTES && l.chars().all(|c| " |^".contains(c));
    let mut out: Vec<String> = message
        .trim_end()
        .lines()
        .filter(|l| !caret_past_quote(l))
        .map(|l| shorten(l).into_owned())
        .collect();
    for line in &mut out {
        let Some((word, expected)) = unknown_and_expected(line) else {
            continue;
        };
        let h = hint(word, expected.split(", ").map(|e| e.trim_matches('`')));
        line.push_str(&h);
    }
    out.join("\n")
}

/// `("x", "`a`, `b`")` from serde's "unknown field `x`, expected one of `a`, `b`"
/// (also "unknown variant", and "expected `a`" for a single choice).
fn unknown_and_expected(line: &str) -> Option<(&str, &str)> {
    let i = line
        .find("unknown field `")
        .or_else(|| line.find("unknown variant `"))?;
    let rest = &line[i..];
    let start = rest.find('`')? + 1;
    let len = rest[start..].find('`')?;
    let word = &rest[start..start + len];
    let after = &rest[start + len + 1..];
    let expected = after
        .strip_prefix(", expected one of ")
        .or_else(|| after.strip_prefix(", expected "))?;
    Some((word, expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_a_close_name_and_nothing_for_a_far_one() {
        let known = ["iodepth", "iodepth_low", "ioengine"];
        assert_eq!(did_you_mean("iodpeth", known), Some("iodepth"));
        assert_eq!(did_you_mean("bz", ["bs", "rw"]), Some("bs"));
        assert_eq!(did_you_mean("zzzzzz", known), None);
        assert_eq!(did_you_mean("iodepth", known), None, "an exact name is no slip");
        assert_eq!(hint("sede", ["seed", "max_time_s"]), "; did you mean `seed`?");
    }

    #[test]
    fn serde_errors_get_a_hint_and_long_lines_are_cut() {
        let m = "TOML parse error at line 1, column 1\nunknown field `sede`, expected one of `seed`, `max_time_s`\n";
        assert_eq!(
            tidy_serde_error(m),
            "TOML parse error at line 1, column 1\nunknown field `sede`, expected one of `seed`, `max_time_s`; did you mean `seed`?"
        );
        let m = "unknown variant `fcq`, expected `cfq`";
        assert!(tidy_serde_error(m).ends_with("; did you mean `cfq`?"));
        let long = format!("1 | x = {}", "[".repeat(100_000));
        let caret = format!("  |{}^", " ".repeat(100_000));
        let t = tidy_serde_error(&format!("{long}\n{caret}"));
        assert!(t.len() < MAX_QUOTED_BYTES + 40, "{}", t.len());
        assert!(t.ends_with("(100008 bytes in all)"), "{t}");
        assert_eq!(
            shorten(&"é".repeat(150)),
            format!("{}… (300 bytes in all)", "é".repeat(100))
        );
    }
}
