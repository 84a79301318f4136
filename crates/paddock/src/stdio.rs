//! Writing to the terminal without ever panicking: `paddock run job.toml |
//! head -3` closes stdout (and `2>&1 | head` stderr) under a running job,
//! and `println!` panics on the broken pipe, unwinding through the job. The
//! macros here write like `print!`, `println!` and `eprintln!` and ignore
//! write errors: what the terminal misses the store still has, and the job
//! goes on to its end.

/// `print!` that ignores a closed or failing stdout.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// `println!` that ignores a closed or failing stdout.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that ignores a closed or failing stderr.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
