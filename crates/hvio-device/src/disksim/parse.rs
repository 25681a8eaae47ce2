//! A reader for DiskSim 4.0 parameter files (`.parv`, `.diskspecs`,
//! `.model`): `type name { key = value, ... }` blocks, `[ ... ]` lists,
//! typed anonymous blocks as values, `source file` includes (at top level
//! and as a value), `#` comments, `instantiate` and `topology` statements.
//! Keys may contain spaces and punctuation (`Segment size (in blks)`).

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use thiserror::Error;

/// A parse or load error, with its place.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SpecError {
    /// A line that does not parse.
    #[error("{file}:{line}: {msg}")]
    Syntax {
        /// The file.
        file: String,
        /// The line.
        line: u32,
        /// What is wrong.
        msg: String,
    },
    /// A key with a bad value or a missing one.
    #[error("{file}:{line}: key `{key}`: {msg}")]
    Key {
        /// The file.
        file: String,
        /// The line.
        line: u32,
        /// The key.
        key: String,
        /// What is wrong.
        msg: String,
    },
    /// A file-level problem (cannot be read, a missing block).
    #[error("{file}: {msg}")]
    File {
        /// The file.
        file: String,
        /// What is wrong.
        msg: String,
    },
}

/// Where something was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Place {
    /// The file.
    pub file: Arc<str>,
    /// The line (from 1).
    pub line: u32,
}

/// A parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A number.
    Num(f64),
    /// A bare word (an identifier, a file name, a type name).
    Word(String),
    /// A bracketed list.
    List(Vec<Value>),
    /// A nested block.
    Block(Block),
}

/// One `key = value` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The key as written.
    pub key: String,
    /// Its value.
    pub value: Value,
    /// Where it was written.
    pub place: Place,
}

/// A block: `type [name] { entries }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The block's type (`disksim_disk`, ...).
    pub typ: String,
    /// Its instance name, if any.
    pub name: Option<String>,
    /// Its entries in file order.
    pub entries: Vec<Entry>,
    /// Where it starts.
    pub place: Place,
    /// The directory relative file names in this block resolve against.
    pub dir: PathBuf,
}

impl Block {
    /// The first entry for `key`, ignoring ASCII case.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.key.eq_ignore_ascii_case(key))
    }
}

/// A whole parameter file with its includes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpecFile {
    /// Top-level named blocks, in order (includes spliced in place).
    pub blocks: Vec<Block>,
    /// `instantiate [ names ] as type-name` statements.
    pub instances: Vec<(Vec<String>, String)>,
}

impl SpecFile {
    /// The files the description was read from (the top file's blocks and
    /// every `source`d file's), each once, in order of first appearance.
    pub fn files(&self) -> Vec<PathBuf> {
        fn note(f: &str, out: &mut Vec<PathBuf>) {
            if !out.iter().any(|p| p.as_os_str() == f) {
                out.push(PathBuf::from(f));
            }
        }
        fn walk(b: &Block, out: &mut Vec<PathBuf>) {
            note(&b.place.file, out);
            for e in &b.entries {
                note(&e.place.file, out);
                let mut stack = vec![&e.value];
                while let Some(v) = stack.pop() {
                    match v {
                        Value::Block(inner) => walk(inner, out),
                        Value::List(items) => stack.extend(items),
                        _ => {}
                    }
                }
            }
        }
        let mut out = Vec::new();
        for b in &self.blocks {
            walk(b, &mut out);
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open,
    Close,
    LOpen,
    LClose,
    Comma,
    Eq,
    Word(String),
}

struct Lexer {
    toks: Vec<(Tok, u32)>,
    pos: usize,
    file: Arc<str>,
    dir: PathBuf,
    depth: u32,
    /// Lists and blocks open around the current token.
    nest: u32,
    /// `source` includes left for the whole read (shared by every file).
    includes: Rc<Cell<u32>>,
}

fn lex(text: &str) -> Vec<(Tok, u32)> {
    let mut out = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line_no = ln as u32 + 1;
        let line = match line.find('#') {
            Some(i) => &line[..i],
            None => line,
        };
        let mut word = String::new();
        let flush = |w: &mut String, out: &mut Vec<(Tok, u32)>| {
            if !w.is_empty() {
                out.push((Tok::Word(std::mem::take(w)), line_no));
            }
        };
        for ch in line.chars() {
            let t = match ch {
                '{' => Some(Tok::Open),
                '}' => Some(Tok::Close),
                '[' => Some(Tok::LOpen),
                ']' => Some(Tok::LClose),
                ',' => Some(Tok::Comma),
                '=' => Some(Tok::Eq),
                c if c.is_whitespace() => {
                    flush(&mut word, &mut out);
                    None
                }
                c => {
                    word.push(c);
                    None
                }
            };
            if let Some(t) = t {
                flush(&mut word, &mut out);
                out.push((t, line_no));
            }
        }
        flush(&mut word, &mut out);
    }
    out
}

const MAX_INCLUDE_DEPTH: u32 = 16;
/// The most `source` includes one read expands (ten files each sourcing the
/// next ten times is 10^16 reads without a loop).
pub const MAX_INCLUDES: u32 = 1024;
/// Lists and blocks nest at most this deep (deeper would overflow the stack).
pub const MAX_NESTING: u32 = 64;
/// The largest parameter file read (`source /dev/zero` must end).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads a parameter file and everything it includes.
pub fn read_spec(path: &Path) -> Result<SpecFile, SpecError> {
    read_file(path, 0, &Rc::new(Cell::new(MAX_INCLUDES)))
}

/// A text file of at most [`MAX_FILE_BYTES`]: not UTF-8 is an error naming the line.
pub(crate) fn read_text(path: &Path) -> Result<String, SpecError> {
    let bytes = read_bytes(path)?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        not_utf8(&path.display().to_string(), e.as_bytes(), at)
    })
}

/// The bytes of a file of at most [`MAX_FILE_BYTES`], in one read into a
/// buffer of the file's length (a file that does not know its length, a
/// pipe or `/dev/zero`, grows the buffer as it is read, up to the bound).
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>, SpecError> {
    let mut bytes = Vec::new();
    read_bytes_into(path, &mut bytes)?;
    Ok(bytes)
}

/// [`read_bytes`] into `bytes` (emptied first), whose memory a caller
/// reading file after file keeps: it grows only to the longest file's length.
pub(crate) fn read_bytes_into(path: &Path, bytes: &mut Vec<u8>) -> Result<(), SpecError> {
    use std::io::Read;
    let file = path.display().to_string();
    let io = |e: std::io::Error| SpecError::File {
        file: file.clone(),
        msg: e.to_string(),
    };
    let too_large = || SpecError::File {
        file: file.clone(),
        msg: format!("larger than {} MiB: not a DiskSim file", MAX_FILE_BYTES >> 20),
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_or(0, |m| m.len());
    if len > MAX_FILE_BYTES {
        return Err(too_large());
    }
    bytes.clear();
    bytes.reserve_exact(len as usize);
    f.take(MAX_FILE_BYTES + 1).read_to_end(bytes).map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large());
    }
    Ok(())
}

/// The error for `bytes`, read from `file`, whose byte `at` is the first
/// that is not UTF-8: it names the line and the byte.
pub(crate) fn not_utf8(file: &str, bytes: &[u8], at: usize) -> SpecError {
    SpecError::Syntax {
        file: file.to_string(),
        line: bytes[..at].iter().filter(|&&c| c == b'\n').count() as u32 + 1,
        msg: format!("byte {at} is not UTF-8"),
    }
}

fn read_file(path: &Path, depth: u32, includes: &Rc<Cell<u32>>) -> Result<SpecFile, SpecError> {
    let text = read_text(path)?;
    parse_with(&text, path, depth, includes.clone())
}

/// Parses the text of a parameter file named `path` (includes resolve against its directory).
pub fn parse_spec(text: &str, path: &Path, depth: u32) -> Result<SpecFile, SpecError> {
    parse_with(text, path, depth, Rc::new(Cell::new(MAX_INCLUDES)))
}

fn parse_with(text: &str, path: &Path, depth: u32, includes: Rc<Cell<u32>>) -> Result<SpecFile, SpecError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lx = Lexer {
        toks: lex(text),
        pos: 0,
        file: Arc::from(path.display().to_string().as_str()),
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        depth,
        nest: 0,
        includes,
    };
    lx.top()
}

impl Lexer {
    fn line(&self) -> u32 {
        self.toks.get(self.pos).or(self.toks.last()).map_or(1, |t| t.1)
    }

    fn err(&self, msg: impl Into<String>) -> SpecError {
        SpecError::Syntax {
            file: self.file.to_string(),
            line: self.line(),
            msg: msg.into(),
        }
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    fn peek2(&self) -> Option<&Tok> {
        self.toks.get(self.pos + 1).map(|t| &t.0)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.0.clone());
        self.pos += 1;
        t
    }

    fn expect(&mut self, want: Tok, what: &str) -> Result<(), SpecError> {
        match self.next() {
            Some(t) if t == want => Ok(()),
            Some(t) => {
                self.pos -= 1;
                Err(self.err(format!("expected {what}, found {}", show(&t))))
            }
            None => Err(self.err(format!("expected {what}, found end of file"))),
        }
    }

    fn word(&mut self, what: &str) -> Result<String, SpecError> {
        match self.next() {
            Some(Tok::Word(w)) => Ok(w),
            Some(t) => {
                self.pos -= 1;
                Err(self.err(format!("expected {what}, found {}", show(&t))))
            }
            None => Err(self.err(format!("expected {what}, found end of file"))),
        }
    }

    fn place(&self) -> Place {
        Place {
            file: self.file.clone(),
            line: self.line(),
        }
    }

    fn include(&self, name: &str) -> Result<SpecFile, SpecError> {
        if self.depth >= MAX_INCLUDE_DEPTH {
            return Err(self.err(format!(
                "`source {name}`: includes nested more than {MAX_INCLUDE_DEPTH} deep"
            )));
        }
        if self.includes.get() == 0 {
            return Err(self.err(format!("`source {name}`: more than {MAX_INCLUDES} includes in all")));
        }
        self.includes.set(self.includes.get() - 1);
        let path = self.dir.join(name);
        read_file(&path, self.depth + 1, &self.includes).map_err(|e| match e {
            SpecError::File { file, msg } => SpecError::Syntax {
                file: self.file.to_string(),
                line: self.line(),
                msg: format!("`source {file}`: {msg}"),
            },
            other => other,
        })
    }

    fn top(&mut self) -> Result<SpecFile, SpecError> {
        let mut spec = SpecFile::default();
        while let Some(t) = self.peek().cloned() {
            let Tok::Word(w) = t else {
                return Err(self.err(format!(
                    "expected a block, `source`, `instantiate` or `topology`, found {}",
                    show(&t)
                )));
            };
            match w.as_str() {
                "source" => {
                    self.next();
                    let name = self.word("a file name after `source`")?;
                    let inc = self.include(&name)?;
                    spec.blocks.extend(inc.blocks);
                    spec.instances.extend(inc.instances);
                }
                "instantiate" => {
                    self.next();
                    let Value::List(names) = self.value()? else {
                        return Err(self.err("expected `[ names ]` after `instantiate`"));
                    };
                    let names = names
                        .into_iter()
                        .map(|v| match v {
                            Value::Word(w) => Ok(w),
                            other => Err(self.err(format!("instance names must be words, found {other:?}"))),
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let as_ = self.word("`as`")?;
                    if as_ != "as" {
                        return Err(self.err(format!("expected `as`, found `{as_}`")));
                    }
                    let typ = self.word("a type name after `as`")?;
                    spec.instances.push((names, typ));
                }
                "topology" => {
                    self.next();
                    // topology TYPE NAME [ TYPE NAME [ ... ] ... ]
                    self.word("a component type")?;
                    self.word("a component name")?;
                    self.topology_list()?;
                }
                _ => {
                    let place = self.place();
                    self.next();
                    let name = self.word("a block name")?;
                    self.expect(Tok::Open, "`{`")?;
                    let entries = self.entries()?;
                    spec.blocks.push(Block {
                        typ: w,
                        name: Some(name),
                        entries,
                        place,
                        dir: self.dir.clone(),
                    });
                }
            }
        }
        Ok(spec)
    }

    /// Runs `f` one list or block deeper (at most [`MAX_NESTING`]).
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, SpecError>) -> Result<T, SpecError> {
        if self.nest >= MAX_NESTING {
            return Err(self.err(format!("lists and blocks nested more than {MAX_NESTING} deep")));
        }
        self.nest += 1;
        let r = f(self);
        self.nest -= 1;
        r
    }

    fn topology_list(&mut self) -> Result<(), SpecError> {
        self.nested(Self::topology_list_inner)
    }

    fn topology_list_inner(&mut self) -> Result<(), SpecError> {
        self.expect(Tok::LOpen, "`[`")?;
        loop {
            match self.peek() {
                Some(Tok::LClose) => {
                    self.next();
                    return Ok(());
                }
                Some(Tok::Comma) => {
                    self.next();
                }
                Some(Tok::Word(_)) => {
                    self.word("a component type")?;
                    self.word("a component name")?;
                    self.topology_list()?;
                }
                Some(t) => return Err(self.err(format!("unexpected {} in topology", show(t)))),
                None => return Err(self.err("unterminated topology list")),
            }
        }
    }

    /// Entries up to and including the closing `}`.
    fn entries(&mut self) -> Result<Vec<Entry>, SpecError> {
        let mut out = Vec::new();
        loop {
            match self.peek() {
                Some(Tok::Close) => {
                    self.next();
                    return Ok(out);
                }
                Some(Tok::Comma) => {
                    self.next();
                }
                Some(Tok::Word(_)) => {
                    let place = self.place();
                    let mut key = Vec::new();
                    while let Some(Tok::Word(_)) = self.peek() {
                        key.push(self.word("a key")?);
                    }
                    let key = key.join(" ");
                    match self.peek() {
                        Some(Tok::Eq) => {
                            self.next();
                        }
                        _ => {
                            return Err(SpecError::Key {
                                file: self.file.to_string(),
                                line: self.line(),
                                key,
                                msg: "expected `=` after the key".into(),
                            })
                        }
                    }
                    let value = self.value().map_err(|e| match e {
                        SpecError::Syntax { file, line, msg } => SpecError::Key {
                            file,
                            line,
                            key: key.clone(),
                            msg,
                        },
                        other => other,
                    })?;
                    out.push(Entry { key, value, place });
                    match self.peek() {
                        Some(Tok::Comma) | Some(Tok::Close) => {}
                        Some(t) => {
                            return Err(self.err(format!(
                                "expected `,` or `}}` after the value of `{}`, found {}",
                                out.last().unwrap().key,
                                show(t)
                            )))
                        }
                        None => return Err(self.err("unterminated block: missing `}`")),
                    }
                }
                Some(t) => return Err(self.err(format!("expected a key or `}}`, found {}", show(t)))),
                None => return Err(self.err("unterminated block: missing `}`")),
            }
        }
    }

    fn value(&mut self) -> Result<Value, SpecError> {
        self.nested(Self::value_inner)
    }

    fn value_inner(&mut self) -> Result<Value, SpecError> {
        let place = self.place();
        match self.next() {
            Some(Tok::LOpen) => {
                let mut items = Vec::new();
                loop {
                    match self.peek() {
                        Some(Tok::LClose) => {
                            self.next();
                            return Ok(Value::List(items));
                        }
                        Some(Tok::Comma) => {
                            self.next();
                        }
                        Some(_) => items.push(self.value()?),
                        None => return Err(self.err("unterminated list: missing `]`")),
                    }
                }
            }
            Some(Tok::Word(w)) => {
                if w == "source" {
                    if let Some(Tok::Word(_)) = self.peek() {
                        let name = self.word("a file name")?;
                        let inc = self.include(&name)?;
                        let mut blocks = inc.blocks;
                        if blocks.len() != 1 {
                            return Err(self.err(format!(
                                "`source {name}` as a value must define exactly one block, found {}",
                                blocks.len()
                            )));
                        }
                        return Ok(Value::Block(blocks.remove(0)));
                    }
                }
                if let Some(Tok::Open) = self.peek() {
                    self.next();
                    let entries = self.entries()?;
                    return Ok(Value::Block(Block {
                        typ: w,
                        name: None,
                        entries,
                        place,
                        dir: self.dir.clone(),
                    }));
                }
                if let (Some(Tok::Word(_)), Some(Tok::Open)) = (self.peek(), self.peek2()) {
                    let name = self.word("a block name")?;
                    self.next();
                    let entries = self.entries()?;
                    return Ok(Value::Block(Block {
                        typ: w,
                        name: Some(name),
                        entries,
                        place,
                        dir: self.dir.clone(),
                    }));
                }
                Ok(match w.parse::<f64>() {
                    Ok(x) => Value::Num(x),
                    Err(_) => Value::Word(w),
                })
            }
            Some(t) => {
                self.pos -= 1;
                Err(self.err(format!("expected a value, found {}", show(&t))))
            }
            None => Err(self.err("expected a value, found end of file")),
        }
    }
}

fn show(t: &Tok) -> String {
    match t {
        Tok::Open => "`{`".into(),
        Tok::Close => "`}`".into(),
        Tok::LOpen => "`[`".into(),
        Tok::LClose => "`]`".into(),
        Tok::Comma => "`,`".into(),
        Tok::Eq => "`=`".into(),
        Tok::Word(w) => format!("`{w}`"),
    }
}

/// Reads a DiskSim extracted seek curve (`Seek distances measured: N`
/// followed by `distance, ms` lines).
pub fn read_seek_table(path: &Path) -> Result<(Vec<f64>, Vec<f64>), SpecError> {
    let file = path.display().to_string();
    let text = read_text(path)?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (hl, header) = lines.next().ok_or_else(|| SpecError::File {
        file: file.clone(),
        msg: "empty seek table".into(),
    })?;
    let count: usize = header
        .rsplit(':')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .filter(|_| header.to_ascii_lowercase().contains("seek distances"))
        .ok_or_else(|| SpecError::Syntax {
            file: file.clone(),
            line: hl as u32 + 1,
            msg: format!("expected `Seek distances measured: N`, found `{header}`"),
        })?;
    // The header's count is checked below, not trusted for memory.
    let (mut d, mut t) = (Vec::new(), Vec::new());
    for (i, l) in lines {
        let mut parts = l
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty());
        let parsed = (
            parts.next().and_then(|x| x.parse::<f64>().ok()),
            parts.next().and_then(|x| x.parse::<f64>().ok()),
        );
        match parsed {
            (Some(a), Some(b)) if parts.next().is_none() => {
                d.push(a);
                t.push(b);
            }
            _ => {
                return Err(SpecError::Syntax {
                    file,
                    line: i as u32 + 1,
                    msg: format!("expected `distance, ms`, found `{l}`"),
                })
            }
        }
    }
    if d.len() != count {
        return Err(SpecError::Syntax {
            file,
            line: hl as u32 + 1,
            msg: format!("header says {count} distances, file has {}", d.len()),
        });
    }
    Ok((d, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SpecFile, SpecError> {
        parse_spec(text, Path::new("/nonexistent/test.parv"), 0)
    }

    #[test]
    fn blocks_lists_comments() {
        let s = parse(
            "# a comment\n\
             disksim_disk D-1_x {\n\
               Segment size (in blks) = 256, # trailing\n\
               Read hit over. after read = 0.953430,\n\
               Access time type = trackSwitchPlusRotation,\n\
               Zones = [ dm_layout_g1_zone { First cylinder number = 0, slips = [ 1, 2 ], defects = [] } ],\n\
               Scheduler = disksim_ioqueue { Scheduling policy = 1 }\n\
             }\n\
             instantiate [ disk0 ] as D-1_x\n\
             topology disksim_iodriver driver0 [ disksim_bus bus0 [ disksim_disk disk0 [] ] ]\n",
        )
        .unwrap();
        assert_eq!(s.blocks.len(), 1);
        let b = &s.blocks[0];
        assert_eq!(b.name.as_deref(), Some("D-1_x"));
        assert_eq!(b.get("segment size (in blks)").unwrap().value, Value::Num(256.0));
        assert_eq!(b.get("Read hit over. after read").unwrap().place.line, 4);
        assert_eq!(
            b.get("Access time type").unwrap().value,
            Value::Word("trackSwitchPlusRotation".into())
        );
        let Value::List(z) = &b.get("Zones").unwrap().value else {
            panic!()
        };
        let Value::Block(zb) = &z[0] else { panic!() };
        assert_eq!(zb.typ, "dm_layout_g1_zone");
        assert_eq!(
            zb.get("slips").unwrap().value,
            Value::List(vec![Value::Num(1.0), Value::Num(2.0)])
        );
        assert_eq!(s.instances, vec![(vec!["disk0".to_string()], "D-1_x".to_string())]);
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = parse("disksim_disk D {\n  Good = 1,\n  Bad key 2\n}\n").unwrap_err();
        assert_eq!(
            e,
            SpecError::Key {
                file: "/nonexistent/test.parv".into(),
                line: 4,
                key: "Bad key 2".into(),
                msg: "expected `=` after the key".into()
            }
        );
        let e = parse("disksim_disk D {\n  A = [ 1, 2,\n").unwrap_err();
        assert!(
            e.to_string().contains("test.parv:2") && e.to_string().contains("unterminated list"),
            "{e}"
        );
        let e = parse("disksim_disk D {\n  A = 1 2\n}").unwrap_err();
        assert!(e.to_string().contains(":2:"), "{e}");
        let e = parse("disksim_disk D {\n  A = 1,\n").unwrap_err();
        assert!(e.to_string().contains("missing `}`"), "{e}");
        let e = parse("source missing.model\n").unwrap_err();
        assert!(
            e.to_string().contains("test.parv:1") && e.to_string().contains("missing.model"),
            "{e}"
        );
    }

    #[test]
    fn includes_resolve_relative_to_the_including_file() {
        let dir = std::env::temp_dir().join(format!("hvio-disksim-parse-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/m.model"), "dm_disk M {\n Number of cylinders = 10\n}\n").unwrap();
        std::fs::write(
            dir.join("sub/d.diskspecs"),
            "disksim_disk D {\n Model = source m.model,\n X = 1\n}\n",
        )
        .unwrap();
        std::fs::write(dir.join("top.parv"), "# top\nsource sub/d.diskspecs\n").unwrap();
        let s = read_spec(&dir.join("top.parv")).unwrap();
        let Value::Block(m) = &s.blocks[0].get("Model").unwrap().value else {
            panic!()
        };
        assert_eq!(m.name.as_deref(), Some("M"));
        assert_eq!(m.get("Number of cylinders").unwrap().value, Value::Num(10.0));
        assert!(m.place.file.ends_with("m.model"));
        // A self-include is stopped, not a stack overflow.
        std::fs::write(dir.join("loop.parv"), "source loop.parv\n").unwrap();
        let e = read_spec(&dir.join("loop.parv")).unwrap_err();
        assert!(e.to_string().contains("nested"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
