//! A tiny classic-BPF assembler, just enough for the seccomp program of
//! [`crate::filter`]. Instructions are appended in order; jumps name their
//! targets by [`Label`] (or [`Target::Next`], the following instruction),
//! labels are bound to the position of the next instruction appended with
//! [`Asm::bind`], and [`Asm::finish`] resolves the offsets in a second pass.
//! Classic BPF only jumps forward, conditional jumps by at most 255
//! instructions: a target bound before its jump, bound twice, never bound,
//! past the end or too far away makes `finish` fail with
//! [`SetupError::Seccomp`], never a panic.

use crate::error::SetupError;

// Opcodes (linux/bpf_common.h), with the 16-bit type `sock_filter::code` has.
const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const ALU_AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const JMP_JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
const JMP_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JMP_JGT_K: u16 = (libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K) as u16;
const JMP_JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JMP_JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// A position in the program, bound once with [`Asm::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// Where a jump goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The instruction that follows the jump.
    Next,
    /// The instruction `label` is bound to.
    At(Label),
}

impl From<Label> for Target {
    fn from(label: Label) -> Self {
        Target::At(label)
    }
}

/// One instruction whose jump targets are not resolved yet.
struct Insn {
    code: u16,
    k: u32,
    jt: Target,
    jf: Target,
}

/// The program being assembled.
pub struct Asm {
    insns: Vec<Insn>,
    /// Where each label is bound, and whether it was bound more than once.
    labels: Vec<(Option<usize>, bool)>,
}

impl Asm {
    pub fn new() -> Self {
        Asm {
            insns: Vec::with_capacity(128),
            labels: Vec::with_capacity(64),
        }
    }

    /// A new, unbound label.
    pub fn label(&mut self) -> Label {
        self.labels.push((None, false));
        Label(self.labels.len() - 1)
    }

    /// Binds `label` to the next instruction appended.
    pub fn bind(&mut self, label: Label) {
        let here = self.insns.len();
        if let Some((at, twice)) = self.labels.get_mut(label.0) {
            *twice |= at.is_some();
            *at = Some(here);
        }
    }

    fn push(&mut self, code: u16, k: u32, jt: Target, jf: Target) {
        self.insns.push(Insn { code, k, jt, jf });
    }

    /// `A = *(u32 *)(data + offset)`.
    pub fn load(&mut self, offset: u32) {
        self.push(LD_W_ABS, offset, Target::Next, Target::Next);
    }

    /// `A &= k`.
    pub fn and(&mut self, k: u32) {
        self.push(ALU_AND_K, k, Target::Next, Target::Next);
    }

    /// Jumps to `to` unconditionally (32-bit offset).
    pub fn ja(&mut self, to: impl Into<Target>) {
        self.push(JMP_JA, 0, to.into(), Target::Next);
    }

    /// `A == k ? jt : jf`.
    pub fn jeq(&mut self, k: u32, jt: impl Into<Target>, jf: impl Into<Target>) {
        self.push(JMP_JEQ_K, k, jt.into(), jf.into());
    }

    /// `A > k ? jt : jf` (unsigned).
    pub fn jgt(&mut self, k: u32, jt: impl Into<Target>, jf: impl Into<Target>) {
        self.push(JMP_JGT_K, k, jt.into(), jf.into());
    }

    /// `A >= k ? jt : jf` (unsigned).
    pub fn jge(&mut self, k: u32, jt: impl Into<Target>, jf: impl Into<Target>) {
        self.push(JMP_JGE_K, k, jt.into(), jf.into());
    }

    /// `A & k != 0 ? jt : jf`.
    pub fn jset(&mut self, k: u32, jt: impl Into<Target>, jf: impl Into<Target>) {
        self.push(JMP_JSET_K, k, jt.into(), jf.into());
    }

    /// Returns `k` (a seccomp action).
    pub fn ret(&mut self, k: u32) {
        self.push(RET_K, k, Target::Next, Target::Next);
    }

    /// Resolves every jump into an offset (the second pass).
    pub fn finish(self) -> Result<Vec<libc::sock_filter>, SetupError> {
        let len = self.insns.len();
        let offset = |from: usize, to: Target| -> Result<u32, SetupError> {
            let at = match to {
                Target::Next => return Ok(0),
                Target::At(label) => match self.labels.get(label.0) {
                    Some((Some(at), false)) => *at,
                    Some((Some(_), true)) => return Err(error("a BPF label bound twice")),
                    _ => return Err(error("a BPF jump to an unbound label")),
                },
            };
            if at >= len {
                return Err(error(format!("a BPF jump from {from} past the end ({at})")));
            }
            at.checked_sub(from + 1)
                .and_then(|o| u32::try_from(o).ok())
                .ok_or_else(|| error(format!("a BPF jump from {from} back to {at}")))
        };
        let short = |from: usize, to: Target| -> Result<u8, SetupError> {
            let o = offset(from, to)?;
            u8::try_from(o).map_err(|_| error(format!("a BPF jump from {from} by {o} (max 255)")))
        };
        let mut program = Vec::with_capacity(len);
        for (i, insn) in self.insns.iter().enumerate() {
            program.push(if insn.code == JMP_JA {
                libc::sock_filter {
                    code: insn.code,
                    jt: 0,
                    jf: 0,
                    k: offset(i, insn.jt)?,
                }
            } else {
                libc::sock_filter {
                    code: insn.code,
                    jt: short(i, insn.jt)?,
                    jf: short(i, insn.jf)?,
                    k: insn.k,
                }
            });
        }
        Ok(program)
    }
}

fn error(detail: impl Into<String>) -> SetupError {
    SetupError::Seccomp {
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Asm, Target::Next};

    fn fields(program: &[libc::sock_filter]) -> Vec<(u16, u8, u8, u32)> {
        program.iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect()
    }

    #[test]
    fn labels_resolve_to_forward_offsets() {
        let mut a = Asm::new();
        let (yes, no) = (a.label(), a.label());
        a.load(4);
        a.jeq(7, yes, Next);
        a.jge(9, no, yes);
        a.ja(no);
        a.bind(yes);
        a.ret(1);
        a.bind(no);
        a.ret(2);
        assert_eq!(
            fields(&a.finish().unwrap()),
            vec![
                (0x20, 0, 0, 4),
                (0x15, 2, 0, 7),
                (0x35, 2, 1, 9),
                (0x05, 0, 0, 1),
                (0x06, 0, 0, 1),
                (0x06, 0, 0, 2),
            ]
        );
    }

    #[test]
    fn a_conditional_jump_of_256_fails_and_255_does_not() {
        for (gap, ok) in [(255, true), (256, false)] {
            let mut a = Asm::new();
            let far = a.label();
            a.jeq(0, far, Next);
            for _ in 0..gap {
                a.ret(0);
            }
            a.bind(far);
            a.ret(1);
            let result = a.finish();
            assert_eq!(result.is_ok(), ok, "gap {gap}");
            if let Err(e) = result {
                assert_eq!(e.to_string(), "seccomp: a BPF jump from 0 by 256 (max 255)");
            }
        }
    }

    #[test]
    fn an_unconditional_jump_may_go_further() {
        let mut a = Asm::new();
        let far = a.label();
        a.ja(far);
        for _ in 0..300 {
            a.ret(0);
        }
        a.bind(far);
        a.ret(1);
        assert_eq!(fields(&a.finish().unwrap())[0], (0x05, 0, 0, 300));
    }

    #[test]
    fn bad_labels_fail() {
        let msg = |a: Asm| a.finish().err().map(|e| e.to_string());
        let mut a = Asm::new();
        let back = a.label();
        a.bind(back);
        a.ret(0);
        a.jeq(0, back, Next);
        a.ret(0);
        assert_eq!(
            msg(a).as_deref(),
            Some("seccomp: a BPF jump from 1 back to 0")
        );

        let mut a = Asm::new();
        let never = a.label();
        a.jeq(0, Next, never);
        a.ret(0);
        assert_eq!(
            msg(a).as_deref(),
            Some("seccomp: a BPF jump to an unbound label")
        );

        let mut a = Asm::new();
        let twice = a.label();
        a.jeq(0, twice, Next);
        a.bind(twice);
        a.ret(0);
        a.bind(twice);
        a.ret(1);
        assert_eq!(msg(a).as_deref(), Some("seccomp: a BPF label bound twice"));

        let mut a = Asm::new();
        let end = a.label();
        a.jeq(0, end, Next);
        a.ret(0);
        a.bind(end);
        assert_eq!(
            msg(a).as_deref(),
            Some("seccomp: a BPF jump from 0 past the end (2)")
        );
    }
}
