//! The kernel command line: words separated by spaces, read for boot flags.

/// Whether `word` is one of the space-separated words of `cmdline` (which may end at a NUL).
pub fn has_word(cmdline: &[u8], word: &str) -> bool {
    let end = cmdline
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(cmdline.len());
    cmdline[..end]
        .split(|b| b.is_ascii_whitespace())
        .any(|w| w == word.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::has_word;

    #[test]
    fn finds_whole_words_only() {
        assert!(has_word(b"trace=rejected", "trace=rejected"));
        assert!(has_word(b"quiet  trace=rejected x", "trace=rejected"));
        assert!(has_word(b"trace=rejected\0garbage", "trace=rejected"));
        assert!(!has_word(b"trace=rejectedx", "trace=rejected"));
        assert!(!has_word(b"xtrace=rejected", "trace=rejected"));
        assert!(!has_word(b"\0trace=rejected", "trace=rejected"));
        assert!(!has_word(b"", "trace=rejected"));
    }
}
