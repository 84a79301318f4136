//! The response scan of a terminated tunnel: the bytes from a credential
//! host are searched for the credential's real value (and its other forms)
//! before the job reads them, streaming: a match is replaced by a mask of
//! the same length (the placeholder, cut or padded), so the response's
//! framing stays true, and what could still be the start of a match (a
//! suffix that is a prefix of a value) is held back until the next read
//! decides it, so a value split across reads is still found. The caller
//! flushes what is held when a response message ends ([`Scan::flush`],
//! `super::response`), never on a timer.

use memchr::memmem::Finder;

use crate::secret::Secret;

/// One direction's scan state.
pub struct Scan {
    needles: Vec<Secret>,
    /// A searcher per needle (SIMD substring search: a credential host's
    /// bulk answer, a git pack, is scanned for every form of the value).
    finders: Vec<Finder<'static>>,
    masks: Vec<Vec<u8>>,
    held: Vec<u8>,
    /// Matches replaced so far.
    pub replaced: u64,
}

impl Scan {
    /// A scan for `needles`, each replaced by `mask(len)`.
    pub fn new(needles: &[Secret], mask: impl Fn(usize) -> Vec<u8>) -> Scan {
        let needles: Vec<Secret> = needles
            .iter()
            .filter(|n| !n.expose().is_empty())
            .cloned()
            .collect();
        Scan {
            masks: needles.iter().map(|n| mask(n.expose().len())).collect(),
            finders: needles
                .iter()
                .map(|n| Finder::new(n.expose().as_bytes()).into_owned())
                .collect(),
            needles,
            held: Vec::new(),
            replaced: 0,
        }
    }

    /// Takes in `data`; what may be passed on now (matches replaced).
    pub fn push(&mut self, data: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(data);
        self.replace();
        let keep = self.pending_prefix();
        let rest = self.held.split_off(self.held.len() - keep);
        std::mem::replace(&mut self.held, rest)
    }

    /// Everything held, the message having ended: a value cut there is
    /// not whole within it.
    pub fn flush(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }

    /// Whether bytes are held back.
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// Replaces every whole match in what is held, longest needle first.
    fn replace(&mut self) {
        for (finder, mask) in self.finders.iter().zip(&self.masks) {
            let len = finder.needle().len();
            let mut at = 0;
            while let Some(i) = finder.find(&self.held[at..]) {
                let start = at + i;
                self.held[start..start + len].copy_from_slice(mask);
                self.replaced += 1;
                at = start + len;
            }
        }
    }

    /// The length of the longest suffix of what is held that is a proper
    /// prefix of a needle.
    fn pending_prefix(&self) -> usize {
        let mut best = 0;
        for needle in &self.needles {
            let n = needle.expose().as_bytes();
            let most = (n.len() - 1).min(self.held.len());
            for len in (best + 1..=most).rev() {
                if self.held[self.held.len() - len..] == n[..len] {
                    best = len;
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan() -> Scan {
        Scan::new(
            &[
                Secret::new("TOKEN123".into()),
                Secret::new("VE9LRU4xMjM".into()),
            ],
            |len| vec![b'#'; len],
        )
    }

    /// Feeds `parts` one by one, flushing at the end; what came out.
    fn run(parts: &[&[u8]]) -> (Vec<u8>, u64) {
        let mut s = scan();
        let mut out = Vec::new();
        for p in parts {
            out.extend(s.push(p));
        }
        out.extend(s.flush());
        (out, s.replaced)
    }

    #[test]
    fn a_value_is_replaced_whole_even_split_across_reads() {
        let whole: &[u8] = b"echo: Bearer TOKEN123, again TOKEN123; b64 VE9LRU4xMjM.";
        let want = b"echo: Bearer ########, again ########; b64 ###########.".to_vec();
        assert_eq!(run(&[whole]), (want.clone(), 3));
        // Every split point, and byte by byte.
        for cut in 0..whole.len() {
            assert_eq!(
                run(&[&whole[..cut], &whole[cut..]]),
                (want.clone(), 3),
                "{cut}"
            );
        }
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(run(&bytes), (want, 3));
    }

    #[test]
    fn only_a_possible_start_of_a_value_is_held() {
        let mut s = scan();
        assert_eq!(s.push(b"abc TOK"), b"abc ".to_vec());
        assert!(s.holding());
        assert_eq!(s.push(b"EN12"), Vec::<u8>::new());
        // Not the value after all: all of it goes on.
        assert_eq!(s.push(b"x!"), b"TOKEN12x!".to_vec());
        assert!(!s.holding());
        // Quiet with a prefix held: the caller flushes it.
        assert_eq!(s.push(b"T"), Vec::<u8>::new());
        assert_eq!(s.flush(), b"T".to_vec());
        assert_eq!(s.replaced, 0);
    }
}
