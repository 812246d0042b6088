//! A map by name whose values also have a fixed number: the control plane finds a table or an
//! extern's cells by its name, the compiled program (`exec`) by the number it resolved once,
//! so that a frame hashes no name. Nothing is ever removed, so the numbers hold.

use std::ops::Index;

use super::Names;

#[derive(Clone, Debug)]
pub(super) struct Keyed<T> {
    names: Names<String, usize>,
    items: Vec<(String, T)>,
}

impl<T> Default for Keyed<T> {
    fn default() -> Self {
        Keyed { names: Names::default(), items: Vec::new() }
    }
}

impl<T> Keyed<T> {
    /// Sets `name`'s value (keeping its number if it had one).
    pub fn insert(&mut self, name: String, value: T) {
        match self.names.get(&name) {
            Some(&i) => self.items[i].1 = value,
            None => {
                self.names.insert(name.clone(), self.items.len());
                self.items.push((name, value));
            }
        }
    }

    pub fn number(&self, name: &str) -> Option<usize> {
        self.names.get(name).copied()
    }

    pub fn get(&self, name: &str) -> Option<&T> {
        self.names.get(name).map(|&i| &self.items[i].1)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut T> {
        let i = *self.names.get(name)?;
        Some(&mut self.items[i].1)
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.items.iter().map(|(n, _)| n)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &T)> {
        self.items.iter().map(|(n, v)| (n, v))
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.items.iter_mut().map(|(_, v)| v)
    }

    /// The value numbered `i` (a number `number` gave).
    pub fn at(&self, i: usize) -> &T {
        &self.items[i].1
    }

    pub fn at_mut(&mut self, i: usize) -> &mut T {
        &mut self.items[i].1
    }
}

impl<T> Index<&str> for Keyed<T> {
    type Output = T;
    fn index(&self, name: &str) -> &T {
        self.get(name).expect("a name the map has")
    }
}

impl<T> Index<&String> for Keyed<T> {
    type Output = T;
    fn index(&self, name: &String) -> &T {
        self.get(name).expect("a name the map has")
    }
}

impl<T> FromIterator<(String, T)> for Keyed<T> {
    fn from_iter<I: IntoIterator<Item = (String, T)>>(iter: I) -> Self {
        let mut k = Keyed::default();
        for (n, v) in iter {
            k.insert(n, v);
        }
        k
    }
}
