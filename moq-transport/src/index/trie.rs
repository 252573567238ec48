//! A trie keyed by namespace fields, so that prefix questions cost in proportion to the path and
//! the matches, never to everything stored.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use moq_core::TrackNamespace;
use smallvec::SmallVec;

/// A map from namespaces to values, several values per namespace, each with a caller-chosen id.
///
/// - [`PrefixTrie::prefixes_of`]: values stored at every namespace that is a field-wise prefix of
///   a given one (relay routing of SUBSCRIBE, draft-19 §9.5) — cost: the path length.
/// - [`PrefixTrie::under`]: values stored at or below a prefix (answering SUBSCRIBE_NAMESPACE) —
///   cost: the size of that subtree.
/// - [`PrefixTrie::overlaps`]: whether any stored namespace is a prefix of, equal to, or an
///   extension of a given one (PREFIX_OVERLAP) — cost: the path length.
///
/// ```
/// use moq_core::TrackNamespace;
/// use moq_transport::namespace::PrefixTrie;
/// let ns = |f: &[&str]| TrackNamespace::from_strs(f.iter().copied()).unwrap();
/// let mut t = PrefixTrie::new();
/// t.insert(&ns(&["a"]), 1, "pub-a");
/// t.insert(&ns(&["a", "b"]), 2, "pub-ab");
/// let routes: Vec<_> = t.prefixes_of(&ns(&["a", "b", "c"])).map(|(_, v)| *v).collect();
/// assert_eq!(routes, ["pub-a", "pub-ab"]);
/// assert!(t.overlaps(&ns(&["a", "b", "x"])));
/// assert!(!t.overlaps(&ns(&["b"])));
/// ```
#[derive(Debug)]
pub struct PrefixTrie<V> {
    root: Node<V>,
}

/// A node's field, as the key of its parent's map: the namespace from the root to the node,
/// whose last field it is (16 bytes, a reference count: a leaf shares the namespace stored
/// there, and an inner node holds its prefix, made once with the node; with the field's index
/// beside it, it was 24, and a `Bytes` 32). Hashed and compared as the field's bytes, which
/// the map is searched by.
#[derive(Debug)]
struct Field {
    ns: TrackNamespace,
}

impl Field {
    fn bytes(&self) -> &[u8] {
        self.ns
            .len()
            .checked_sub(1)
            .and_then(|i| self.ns.field(i))
            .unwrap_or_default()
    }
}

impl Hash for Field {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.bytes().hash(state);
    }
}

impl PartialEq for Field {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for Field {}

impl Borrow<[u8]> for Field {
    fn borrow(&self) -> &[u8] {
        self.bytes()
    }
}

/// A node; a namespace's leaf is one entry of its parent's map (its field and this), ~72 bytes
/// with the value inline, where a map and a vector inline and the values apart were ~110 bytes
/// and an allocation more.
#[derive(Debug)]
struct Node<V> {
    /// Boxed, and made with the first child: most nodes are leaves, and an empty map inline is
    /// 48 bytes where the box is 8.
    #[allow(clippy::box_collection)]
    children: Option<Box<HashMap<Field, Node<V>>>>,
    /// Inline while there is one: most namespaces hold one value.
    values: SmallVec<[(u64, V); 1]>,
    /// Number of values in this node and below.
    count: usize,
}

impl<V> Default for Node<V> {
    fn default() -> Self {
        Node {
            children: None,
            values: SmallVec::new(),
            count: 0,
        }
    }
}

impl<V> Node<V> {
    fn child(&self, field: &[u8]) -> Option<&Node<V>> {
        self.children.as_ref()?.get(field)
    }

    fn child_mut(&mut self, field: &[u8]) -> Option<&mut Node<V>> {
        self.children.as_mut()?.get_mut(field)
    }

    fn children(&self) -> impl Iterator<Item = (&Field, &Node<V>)> {
        self.children.iter().flat_map(|c| c.iter())
    }
}

impl<V> Default for PrefixTrie<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> PrefixTrie<V> {
    /// An empty trie.
    pub fn new() -> Self {
        PrefixTrie {
            root: Node::default(),
        }
    }

    /// Number of values stored.
    pub fn len(&self) -> usize {
        self.root.count
    }

    /// True if nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.root.count == 0
    }

    /// Stores `value` at `ns` under `id`.
    pub fn insert(&mut self, ns: &TrackNamespace, id: u64, value: V) {
        let mut node = &mut self.root;
        node.count += 1;
        for (i, field) in ns.fields().enumerate() {
            let children = node.children.get_or_insert_with(Box::default);
            if !children.contains_key(field) {
                // Looked up first: an inner node's key is a prefix, made only with the node.
                children.insert(
                    Field {
                        ns: ns.prefix(i + 1),
                    },
                    Node::default(),
                );
            }
            let Some(child) = children.get_mut(field) else {
                unreachable!("inserted above")
            };
            node = child;
            node.count += 1;
        }
        node.values.push((id, value));
    }

    /// Removes the value stored at `ns` under `id`, pruning empty nodes.
    pub fn remove(&mut self, ns: &TrackNamespace, id: u64) -> Option<V> {
        fn go<V>(node: &mut Node<V>, ns: &TrackNamespace, depth: usize, id: u64) -> Option<V> {
            let removed = match ns.field(depth) {
                None => {
                    let i = node.values.iter().position(|(k, _)| *k == id)?;
                    Some(node.values.swap_remove(i).1)
                }
                Some(first) => {
                    let child = node.child_mut(first)?;
                    let v = go(child, ns, depth + 1, id)?;
                    if child.count == 0
                        && let Some(children) = &mut node.children
                    {
                        children.remove(first);
                        if children.is_empty() {
                            node.children = None;
                        }
                    }
                    Some(v)
                }
            };
            if removed.is_some() {
                node.count -= 1;
            }
            removed
        }
        go(&mut self.root, ns, 0, id)
    }

    /// The values stored exactly at `ns`.
    pub fn at(&self, ns: &TrackNamespace) -> &[(u64, V)] {
        self.node(ns).map(|n| n.values.as_slice()).unwrap_or(&[])
    }

    /// Mutable values stored exactly at `ns`.
    pub fn at_mut(&mut self, ns: &TrackNamespace) -> Option<&mut [(u64, V)]> {
        let mut node = &mut self.root;
        for field in ns.fields() {
            node = node.child_mut(field)?;
        }
        Some(node.values.as_mut_slice())
    }

    fn node(&self, ns: &TrackNamespace) -> Option<&Node<V>> {
        let mut node = &self.root;
        for field in ns.fields() {
            node = node.child(field)?;
        }
        Some(node)
    }

    /// The values stored at every namespace that is a field-wise prefix of `ns` (including `ns`
    /// itself and the empty namespace), shortest first, with the depth they are stored at.
    pub fn prefixes_of<'a>(
        &'a self,
        ns: &'a TrackNamespace,
    ) -> impl Iterator<Item = (usize, &'a V)> + 'a {
        self.entries_on_path(ns).map(|(depth, _, v)| (depth, v))
    }

    /// Like [`PrefixTrie::prefixes_of`], with each value's id.
    pub fn entries_on_path<'a>(
        &'a self,
        ns: &'a TrackNamespace,
    ) -> impl Iterator<Item = (usize, u64, &'a V)> + 'a {
        let mut node = Some(&self.root);
        let mut depth = 0usize;
        std::iter::from_fn(move || {
            let n = node?;
            let d = depth;
            let here = n.values.iter().map(move |(id, v)| (d, *id, v));
            node = ns.field(depth).and_then(|f| n.child(f));
            depth += 1;
            Some(here)
        })
        .flatten()
    }

    /// Every value stored at `prefix` or below it, with the namespace it is stored at.
    pub fn under(&self, prefix: &TrackNamespace) -> Vec<(TrackNamespace, &V)> {
        let mut out = Vec::new();
        let Some(start) = self.node(prefix) else {
            return out;
        };
        fn walk<'a, V>(
            node: &'a Node<V>,
            here: &TrackNamespace,
            out: &mut Vec<(TrackNamespace, &'a V)>,
        ) {
            out.extend(node.values.iter().map(|(_, v)| (here.clone(), v)));
            for (field, child) in node.children() {
                walk(child, &field.ns, out);
            }
        }
        walk(start, prefix, &mut out);
        out
    }

    /// Removes every value `remove` picks, pruning empty nodes, and returns the namespaces they
    /// were stored at (once per value). Cost: the whole trie, with no allocation but for what
    /// is removed.
    pub fn remove_where(&mut self, mut remove: impl FnMut(u64, &V) -> bool) -> Vec<TrackNamespace> {
        fn go<V>(
            node: &mut Node<V>,
            here: &TrackNamespace,
            remove: &mut impl FnMut(u64, &V) -> bool,
            out: &mut Vec<TrackNamespace>,
        ) -> usize {
            let before = node.values.len();
            node.values.retain(|(id, v)| !remove(*id, v));
            let mut removed = before - node.values.len();
            out.extend(std::iter::repeat_n(here.clone(), removed));
            if let Some(children) = &mut node.children {
                children.retain(|field, child| {
                    removed += go(child, &field.ns, remove, out);
                    child.count > 0
                });
                if children.is_empty() {
                    node.children = None;
                }
            }
            node.count -= removed;
            removed
        }
        let mut out = Vec::new();
        go(
            &mut self.root,
            &TrackNamespace::empty(),
            &mut remove,
            &mut out,
        );
        out
    }

    /// Number of values stored at `prefix` or below it.
    pub fn count_under(&self, prefix: &TrackNamespace) -> usize {
        self.node(prefix).map_or(0, |n| n.count)
    }

    /// True if a value is stored at a namespace that is a prefix of `ns`, equal to it, or has it
    /// as a prefix: the PREFIX_OVERLAP test of draft-19 §10.18.
    pub fn overlaps(&self, ns: &TrackNamespace) -> bool {
        let mut node = &self.root;
        if !node.values.is_empty() {
            return true;
        }
        for field in ns.fields() {
            match node.child(field) {
                Some(child) => node = child,
                None => return false,
            }
            if !node.values.is_empty() {
                return true;
            }
        }
        node.count > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(f: &[&str]) -> TrackNamespace {
        TrackNamespace::from_strs(f.iter().copied()).unwrap()
    }

    #[test]
    fn insert_remove_prune() {
        let mut t = PrefixTrie::new();
        t.insert(&ns(&["a", "b"]), 1, ());
        t.insert(&ns(&["a", "b"]), 2, ());
        t.insert(&ns(&["a", "c"]), 3, ());
        assert_eq!(t.len(), 3);
        assert_eq!(t.count_under(&ns(&["a"])), 3);
        assert_eq!(t.remove(&ns(&["a", "b"]), 1), Some(()));
        assert_eq!(t.remove(&ns(&["a", "b"]), 1), None);
        assert_eq!(t.remove(&ns(&["a", "x"]), 2), None);
        assert_eq!(t.len(), 2);
        t.remove(&ns(&["a", "b"]), 2);
        t.remove(&ns(&["a", "c"]), 3);
        assert!(t.is_empty());
        assert!(t.root.children.is_none(), "empty nodes are pruned");
    }

    /// A leaf's key shares the namespace stored there; an inner node's is its own prefix, so
    /// every key is the node's whole path: what `under` and `remove_where` hand back.
    #[test]
    fn keys_are_whole_paths() {
        let mut t = PrefixTrie::new();
        let ab = ns(&["a", "b"]);
        t.insert(&ab, 1, ());
        t.insert(&ns(&["a"]), 2, ());
        let mut under: Vec<_> = t.under(&ns(&["a"])).into_iter().map(|(n, _)| n).collect();
        under.sort();
        assert_eq!(under, [ns(&["a"]), ab.clone()]);
        let mut removed = t.remove_where(|_, _| true);
        removed.sort();
        assert_eq!(removed, [ns(&["a"]), ab]);
        assert!(t.is_empty());
        // A map entry of the relay's index (key and node, one value inline) is 64 bytes; the
        // key with the field's index was 72 (issue 35's eighth round).
        assert_eq!(std::mem::size_of::<Field>(), 16);
        assert!(std::mem::size_of::<(Field, Node<(u64, u64)>)>() <= 64);
    }

    #[test]
    fn overlap_rules() {
        let mut t = PrefixTrie::new();
        t.insert(&ns(&["a", "b"]), 1, ());
        assert!(t.overlaps(&ns(&["a", "b"])), "equal");
        assert!(t.overlaps(&ns(&["a"])), "prefix of an established one");
        assert!(
            t.overlaps(&ns(&["a", "b", "c"])),
            "extends an established one"
        );
        assert!(
            t.overlaps(&TrackNamespace::empty()),
            "the empty prefix overlaps everything"
        );
        assert!(
            !t.overlaps(&ns(&["a", "c"])),
            "disjoint siblings do not overlap"
        );
        assert!(!t.overlaps(&ns(&["ab"])), "whole fields only");
        let mut e = PrefixTrie::new();
        e.insert(&TrackNamespace::empty(), 1, ());
        assert!(e.overlaps(&ns(&["z"])));
    }

    #[test]
    fn under_and_prefixes() {
        let mut t = PrefixTrie::new();
        for (i, f) in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["x"]]
            .iter()
            .enumerate()
        {
            t.insert(&ns(f), i as u64, i);
        }
        let mut under: Vec<usize> = t.under(&ns(&["a"])).into_iter().map(|(_, v)| *v).collect();
        under.sort();
        assert_eq!(under, [0, 1, 2]);
        let pre: Vec<usize> = t
            .prefixes_of(&ns(&["a", "b", "z"]))
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(pre, [0, 1]);
        assert!(t.under(&ns(&["q"])).is_empty());
    }

    #[test]
    fn remove_where_prunes() {
        let mut t = PrefixTrie::new();
        t.insert(&ns(&["a", "b"]), 1, ());
        t.insert(&ns(&["a", "b"]), 2, ());
        t.insert(&ns(&["a", "c"]), 1, ());
        t.insert(&ns(&["x"]), 2, ());
        let mut gone = t.remove_where(|id, _| id == 1);
        gone.sort();
        assert_eq!(gone, [ns(&["a", "b"]), ns(&["a", "c"])]);
        assert_eq!(t.len(), 2);
        assert_eq!(t.count_under(&ns(&["a"])), 1);
        assert_eq!(t.remove_where(|id, _| id == 2).len(), 2);
        assert!(t.is_empty());
        assert!(t.root.children.is_none(), "empty nodes are pruned");
    }
}
