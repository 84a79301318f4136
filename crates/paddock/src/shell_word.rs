//! A word quoted for a POSIX shell, for the commands Paddock suggests
//! (`git -C SOURCE fetch BUNDLE BRANCH:NAME`) and the ones it writes
//! (the scripted upstream's `cat PATH`): a plain word (letters, digits and
//! `_ - . / + : , @ %`) is left as it is, anything else is put in single
//! quotes, a `'` in it written `'\''`. A path with a space or a character
//! outside ASCII (`/home/ana/My Repos/grüße`) is then one word when the
//! command is pasted into a shell, where before the suggestion split it.

use std::path::Path;

/// `word` as one word of a POSIX shell command.
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|ch| {
            ch.is_ascii_alphanumeric()
                || matches!(ch, '_' | '-' | '.' | '/' | '+' | ':' | ',' | '@' | '%')
        });
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The path `path` as one word of a POSIX shell command (a name that is
/// not UTF-8 shown as `Path::display` shows it).
pub fn path(path: &Path) -> String {
    quote(&path.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_a_shell_would_split_or_read_them() {
        let said: Vec<String> = [
            "src/lib.rs",
            "my file",
            "it's",
            "",
            "/tmp/My Repos/grüße",
            "a$b`c`",
        ]
        .into_iter()
        .map(quote)
        .collect();
        assert_eq!(
            said,
            vec![
                "src/lib.rs",
                "'my file'",
                r"'it'\''s'",
                "''",
                "'/tmp/My Repos/grüße'",
                "'a$b`c`'",
            ]
        );
    }

    /// What `quote` makes, a shell reads back as the word it was.
    #[test]
    fn a_shell_reads_each_quoted_word_back_whole() {
        let words = [
            "plain",
            "my file",
            "it's",
            "/tmp/My Repos/grüße",
            "a$b`c` \\n",
        ];
        let line = words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\n' {line}"))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            words.iter().map(|w| format!("{w}\n")).collect::<String>()
        );
    }
}
