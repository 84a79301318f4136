//! The paths of a job's trees before setup ran, held as fingerprints: 16
//! bytes a path whatever its length, so a checkout of many files under
//! long paths (a repository's, hostile: a million files under 4 KB
//! paths) is not held in Paddock's memory name by name, and at most
//! [`MAX_PATHS`] of them (a larger tree is not cached: the setup runs
//! without the cache, said in an event). A path's fingerprint is its
//! parent's and its last name hashed under a key drawn for each set
//! (SHA-256 of key, parent, name; 128 bits kept), so a walk computes each
//! from its directory's in one step and nobody who does not know the key
//! can make two paths share one; a shared fingerprint would only keep a
//! new path out of the cache (taken for one that was there).

use std::collections::HashSet;

use sha2::{Digest as _, Sha256};

/// The most paths a set holds (at 16 bytes each and the table's slack,
/// some 36 MB).
pub(crate) const MAX_PATHS: usize = 1_000_000;

/// One path's fingerprint; [`PathSet::root`] is the tree's root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Print(u128);

/// A set of paths of one tree, as fingerprints.
#[derive(Debug, Clone)]
pub(crate) struct PathSet {
    /// SHA-256 fed with the set's key.
    keyed: Sha256,
    prints: HashSet<Print>,
}

impl Default for PathSet {
    fn default() -> PathSet {
        let mut keyed = Sha256::new();
        keyed.update(rand::random::<[u8; 32]>());
        PathSet {
            keyed,
            prints: HashSet::new(),
        }
    }
}

/// A set already holding [`MAX_PATHS`].
#[derive(Debug, thiserror::Error)]
#[error("more than {MAX_PATHS} paths (the most the setup cache lists before setup)")]
pub(crate) struct TooMany;

impl PathSet {
    /// The tree's root (an empty path), in no set.
    pub fn root() -> Print {
        Print(0)
    }

    /// The path `name` in the directory whose fingerprint is `parent`.
    pub fn child(&self, parent: Print, name: &[u8]) -> Print {
        let mut h = self.keyed.clone();
        h.update(parent.0.to_le_bytes());
        h.update(name);
        let digest = h.finalize();
        let mut first = [0u8; 16];
        first.copy_from_slice(&digest[..16]);
        Print(u128::from_le_bytes(first))
    }

    /// Adds `print`, unless the set holds [`MAX_PATHS`] already.
    pub fn insert(&mut self, print: Print) -> Result<(), TooMany> {
        if self.prints.len() >= MAX_PATHS {
            return Err(TooMany);
        }
        self.prints.insert(print);
        Ok(())
    }

    pub fn contains(&self, print: Print) -> bool {
        self.prints.contains(&print)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.prints.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path's fingerprint is its directory's and its name's: the same
    /// path in the same set is found, another path or another set's
    /// fingerprint of it is not; the set refuses its [`MAX_PATHS`]+1st.
    #[test]
    fn paths_are_found_by_their_fingerprints_only() {
        let mut set = PathSet::default();
        let a = set.child(PathSet::root(), b"a");
        let ab = set.child(a, b"b");
        set.insert(a).unwrap();
        set.insert(ab).unwrap();
        let other = PathSet::default();
        let b = set.child(PathSet::root(), b"b");
        assert_eq!(
            (
                set.contains(set.child(set.child(PathSet::root(), b"a"), b"b")),
                set.contains(b),
                set.contains(set.child(b, b"a")),
                set.contains(other.child(other.child(PathSet::root(), b"a"), b"b")),
                set.len(),
            ),
            (true, false, false, false, 2)
        );
        for i in 0..MAX_PATHS - 2 {
            set.insert(Print(u128::MAX - i as u128)).unwrap();
        }
        assert_eq!(
            set.insert(set.child(b, b"one more"))
                .map_err(|e| e.to_string()),
            Err(TooMany.to_string())
        );
    }
}
