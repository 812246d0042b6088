//! Tokens to the syntax tree: a recursive-descent parser for the P4-16 subset edgeflow compiles
//! (docs/p4.md). What the language has and the subset does not is refused by name where it is
//! written, never skipped: a program either means what it says here or does not compile.
//! Annotations (`@name(...)`) are kept on the declarations a control plane names (tables, keys,
//! actions, parameters, instances) for P4Info, and set aside elsewhere: none changes behaviour.
//!
//! About 1 250 lines, one concern: one function per production of the grammar, each with the
//! messages for what may go wrong there, in the order the P4-16 grammar lists them.

use crate::diag::{Diagnostic, Pos};
use crate::frontend::ast::*;
use crate::frontend::lexer::{Tok, Token};

type Result<T> = std::result::Result<T, Diagnostic>;

/// Words that cannot name anything. (`type`, `key`, `actions` and `entries` are the language's
/// too, but may name parameters and members, as the architectures do: `CounterType type`.)
const KEYWORDS: [&str; 38] = [
    "abstract",
    "action",
    "apply",
    "bit",
    "bool",
    "const",
    "control",
    "default",
    "else",
    "enum",
    "error",
    "exit",
    "extern",
    "false",
    "header",
    "header_union",
    "if",
    "in",
    "inout",
    "int",
    "match_kind",
    "out",
    "package",
    "parser",
    "return",
    "select",
    "state",
    "struct",
    "switch",
    "table",
    "transition",
    "true",
    "tuple",
    "typedef",
    "value_set",
    "varbit",
    "void",
    "this",
];

/// The widest `varbit<N>` the subset takes (a varbit is held as bytes, not in 128 bits).
pub const VARBIT_MAX: u32 = 4096;

/// Language features the subset leaves out (`what`, in the plural), and how to say so.
fn outside(what: &str) -> String {
    format!("{what} are outside the subset edgeflow compiles (docs/p4.md)")
}

pub fn parse(tokens: Vec<Token>) -> Result<Program> {
    let mut p = Parser { t: tokens, i: 0, annotated: Vec::new(), controller_headers: Vec::new() };
    let mut decls = Vec::new();
    while p.peek() != &Tok::Eof {
        // an empty declaration, as after `struct E { };`: the grammar allows it, it says nothing
        if p.eat(";") {
            continue;
        }
        decls.push(p.declaration()?);
    }
    Ok(Program { decls, controller_headers: p.controller_headers })
}

struct Parser {
    t: Vec<Token>,
    i: usize,
    /// The annotations just read, for the declaration they precede.
    annotated: Vec<Annotation>,
    /// [`Program::controller_headers`], as they are read.
    controller_headers: Vec<(String, String)>,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.t[self.i].tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        &self.t[(self.i + n).min(self.t.len() - 1)].tok
    }

    fn pos(&self) -> Pos {
        self.t[self.i].pos
    }

    fn bump(&mut self) -> Token {
        let t = self.t[self.i].clone();
        if self.i + 1 < self.t.len() {
            self.i += 1;
        }
        t
    }

    fn err<T>(&self, expected: &str) -> Result<T> {
        Err(Diagnostic::new(self.pos(), format!("expected {expected}, found {}", self.peek())))
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == kw)
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        let yes = self.is_kw(kw);
        if yes {
            self.bump();
        }
        yes
    }

    fn is(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(x) if *x == p)
    }

    fn eat(&mut self, p: &str) -> bool {
        let yes = self.is(p);
        if yes {
            self.bump();
        }
        yes
    }

    fn expect(&mut self, p: &str) -> Result<()> {
        if self.eat(p) {
            Ok(())
        } else {
            self.err(&format!("'{p}'"))
        }
    }

    /// A name (not a keyword); `what` says what it names, for the error.
    fn name(&mut self, what: &str) -> Result<Name> {
        match self.peek().clone() {
            Tok::Ident(s) if !KEYWORDS.contains(&s.as_str()) && s != "_" => {
                let pos = self.pos();
                self.bump();
                Ok(Name { text: s, pos })
            }
            _ => self.err(what),
        }
    }

    /// A name where the language's own words may also appear (`apply`, `default`, an `error`
    /// member after the dot).
    fn member_name(&mut self) -> Result<Name> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                let pos = self.pos();
                self.bump();
                Ok(Name { text: s, pos })
            }
            _ => self.err("a member name"),
        }
    }

    /// Reads annotations, `@name` with any parenthesised or bracketed argument, into
    /// `self.annotated`: the next table, key, action, parameter or instance built takes them,
    /// and the next call to this replaces them, so they never reach a later declaration.
    fn annotations(&mut self) -> Result<()> {
        self.annotated.clear();
        while self.eat("@") {
            let name = self.member_name()?;
            let mut args = Vec::new();
            if self.is("(") || self.is("[") {
                let open = self.pos();
                let mut depth = 0i32;
                loop {
                    let tok = self.bump().tok.clone();
                    match tok {
                        Tok::Punct("(") | Tok::Punct("[") => depth += 1,
                        Tok::Punct(")") | Tok::Punct("]") => depth -= 1,
                        Tok::Eof => return Err(Diagnostic::new(open, "an annotation's argument is not closed")),
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                    if depth > 1 || !matches!(tok, Tok::Punct("(") | Tok::Punct("[")) {
                        args.push(tok);
                    }
                }
            }
            self.annotated.push(Annotation { name, args });
        }
        Ok(())
    }

    fn take_annotations(&mut self) -> Vec<Annotation> {
        std::mem::take(&mut self.annotated)
    }

    fn declaration(&mut self) -> Result<Decl> {
        self.annotations()?;
        let pos = self.pos();
        let word = match self.peek() {
            Tok::Ident(s) => s.clone(),
            _ => return self.err("a declaration"),
        };
        match word.as_str() {
            "const" => {
                self.bump();
                let (ty, name, value) = self.const_rest()?;
                Ok(Decl::Const { ty, name, value })
            }
            "typedef" => {
                self.bump();
                let ty = self.ty()?;
                let name = self.name("the typedef's name")?;
                self.expect(";")?;
                Ok(Decl::Typedef { ty, name })
            }
            "header" | "struct" => {
                self.bump();
                let annotations = self.take_annotations();
                let name = self.name(&format!("the {word}'s name"))?;
                if let Some(kind) = annotation_str(&annotations, "controller_header").filter(|_| word == "header") {
                    self.controller_headers.push((kind.to_string(), name.text.clone()));
                }
                let fields = self.fields()?;
                Ok(if word == "header" { Decl::Header { name, fields } } else { Decl::Struct { name, fields } })
            }
            "enum" => {
                self.bump();
                if self.is_kw("bit") || self.is_kw("int") {
                    let ty = self.ty()?;
                    let name = self.name("the enum's name")?;
                    self.expect("{")?;
                    let mut members = Vec::new();
                    while !self.eat("}") {
                        self.annotations()?;
                        let member = self.name("a member name")?;
                        self.expect("=")?;
                        members.push((member, self.expr()?));
                        if !self.eat(",") && !self.is("}") {
                            return self.err("',' or '}'");
                        }
                    }
                    return Ok(Decl::SerEnum { ty, name, members });
                }
                let name = self.name("the enum's name")?;
                Ok(Decl::Enum { name, members: self.member_list()? })
            }
            "error" => {
                self.bump();
                Ok(Decl::Error { members: self.member_list()? })
            }
            "match_kind" => {
                self.bump();
                Ok(Decl::MatchKind { members: self.member_list()? })
            }
            "extern" => {
                self.bump();
                self.extern_decl()
            }
            "parser" | "control" | "package" => {
                self.bump();
                self.block(&word)
            }
            "action" => {
                self.bump();
                Ok(Decl::Action(self.action_rest()?))
            }
            "header_union" => {
                self.bump();
                let name = self.name("the header union's name")?;
                let fields = self.fields()?;
                Ok(Decl::HeaderUnion { name, fields })
            }
            "value_set" => Err(Diagnostic::new(pos, "a value_set belongs inside a parser (P4-16 12.11)")),
            "type" => Err(Diagnostic::new(pos, outside("new types (type T)"))),
            "abstract" => Err(Diagnostic::new(pos, outside("abstract methods"))),
            "table" => Err(Diagnostic::new(pos, "a table belongs inside a control")),
            "state" => Err(Diagnostic::new(pos, "a state belongs inside a parser")),
            _ => {
                // `T name(` or `T name<`: a function; anything else, `Type(args) name;`.
                let start = self.i;
                let ty = self.ty()?;
                if matches!(self.peek(), Tok::Ident(_)) && matches!(self.peek_at(1), Tok::Punct("(") | Tok::Punct("<"))
                {
                    return Ok(Decl::Function(self.function_rest(ty)?));
                }
                self.i = start;
                let inst = self.instance()?;
                Ok(Decl::Instance(inst))
            }
        }
    }

    /// After a function's return type: `name<T>(params) { body }`.
    fn function_rest(&mut self, ret: Type) -> Result<Function> {
        self.take_annotations();
        let name = self.name("the function's name")?;
        let type_params = self.type_params()?;
        let params = self.params()?;
        if self.is(";") {
            return self.err("'{' (a function has a body; an extern function is declared with 'extern')");
        }
        let body = self.block_stmts()?;
        Ok(Function { ret, name, type_params, params, body })
    }

    /// A type, or a header stack of it: `T[n]`.
    fn ty_or_stack(&mut self) -> Result<Type> {
        let ty = self.ty()?;
        if !self.eat("[") {
            return Ok(ty);
        }
        let size = self.expr()?;
        self.expect("]")?;
        Ok(Type::Stack(Box::new(ty), Box::new(size)))
    }

    /// After `const`: `Type name = value;`.
    fn const_rest(&mut self) -> Result<(Type, Name, Expr)> {
        let ty = self.ty()?;
        let name = self.name("the constant's name")?;
        self.expect("=")?;
        let value = self.expr()?;
        self.expect(";")?;
        Ok((ty, name, value))
    }

    /// `{ Type name; ... }`
    fn fields(&mut self) -> Result<Vec<Field>> {
        self.expect("{")?;
        let mut fields = Vec::new();
        while !self.eat("}") {
            self.annotations()?;
            let ty = self.ty_or_stack()?;
            let name = self.name("a field name")?;
            self.expect(";")?;
            fields.push(Field { ty, name, annotations: self.take_annotations() });
        }
        Ok(fields)
    }

    /// `{ a, b, c }`
    fn member_list(&mut self) -> Result<Vec<Name>> {
        self.expect("{")?;
        let mut members = Vec::new();
        loop {
            self.annotations()?;
            members.push(self.name("a member name")?);
            if self.eat("}") {
                return Ok(members);
            }
            self.expect(",")?;
            if self.eat("}") {
                return Ok(members);
            }
        }
    }

    fn type_params(&mut self) -> Result<Vec<Name>> {
        let mut params = Vec::new();
        if self.eat("<") {
            loop {
                params.push(self.name("a type parameter")?);
                if self.eat(">") {
                    break;
                }
                self.expect(",")?;
            }
        }
        Ok(params)
    }

    fn extern_decl(&mut self) -> Result<Decl> {
        // An object (`extern name<T> { ... }`) or a function (`extern T name<U>(...);`).
        let object = matches!(self.peek(), Tok::Ident(_))
            && (matches!(self.peek_at(1), Tok::Punct("{"))
                || matches!(self.peek_at(1), Tok::Punct("<")) && {
                    let mut n = 2;
                    while !matches!(self.peek_at(n), Tok::Punct(">") | Tok::Eof) {
                        n += 1;
                    }
                    matches!(self.peek_at(n + 1), Tok::Punct("{"))
                });
        if !object {
            let m = self.method(None)?;
            return Ok(Decl::ExternFunction(m));
        }
        let name = self.name("the extern's name")?;
        let type_params = self.type_params()?;
        self.expect("{")?;
        let mut methods = Vec::new();
        while !self.eat("}") {
            self.annotations()?;
            if self.is_kw("abstract") {
                return Err(Diagnostic::new(self.pos(), outside("abstract methods")));
            }
            methods.push(self.method(Some(&name.text))?);
        }
        Ok(Decl::ExternObject { name, type_params, methods })
    }

    /// `T name<U>(params);`, or, in extern `object`, its constructor `object(params);`.
    fn method(&mut self, object: Option<&str>) -> Result<Method> {
        let constructor =
            matches!((self.peek(), self.peek_at(1)), (Tok::Ident(s), Tok::Punct("(")) if Some(s.as_str()) == object);
        let ret = if constructor { None } else { Some(self.ty()?) };
        let name = self.name("a method name")?;
        let type_params = self.type_params()?;
        let params = self.params()?;
        self.expect(";")?;
        Ok(Method { ret, name, type_params, params })
    }

    fn params(&mut self) -> Result<Vec<Param>> {
        self.expect("(")?;
        let mut params = Vec::new();
        if self.eat(")") {
            return Ok(params);
        }
        loop {
            self.annotations()?;
            let direction = if self.eat_kw("in") {
                Some(Direction::In)
            } else if self.eat_kw("out") {
                Some(Direction::Out)
            } else if self.eat_kw("inout") {
                Some(Direction::InOut)
            } else {
                None
            };
            let ty = self.ty()?;
            let name = self.name("a parameter name")?;
            if self.is("=") {
                return Err(Diagnostic::new(self.pos(), outside("default parameter values")));
            }
            let annotations = self.take_annotations();
            params.push(Param { direction, ty, name, annotations });
            if self.eat(")") {
                return Ok(params);
            }
            self.expect(",")?;
        }
    }

    /// A parser, control or package: a type declaration (`;`) or, for parsers and controls, one
    /// with its body.
    fn block(&mut self, word: &str) -> Result<Decl> {
        let name = self.name(&format!("the {word}'s name"))?;
        let type_params = self.type_params()?;
        let params = self.params()?;
        let kind = match word {
            "parser" => BlockKind::Parser,
            "control" => BlockKind::Control,
            _ => BlockKind::Package,
        };
        if self.eat(";") {
            return Ok(Decl::BlockType { kind, name, type_params, params });
        }
        if kind == BlockKind::Package {
            return self.err("';' (a package is declared, not defined)");
        }
        if !type_params.is_empty() {
            return Err(Diagnostic::new(name.pos, outside("generic parsers and controls")));
        }
        if self.is("(") {
            return Err(Diagnostic::new(self.pos(), outside("constructor parameters")));
        }
        self.expect("{")?;
        let mut locals = Vec::new();
        let mut states = Vec::new();
        loop {
            self.annotations()?;
            if self.is("}") {
                if kind == BlockKind::Control {
                    return self.err("'apply' (a control needs an apply block)");
                }
                self.bump();
                return Ok(Decl::Parser { name, params, locals, states });
            }
            if kind == BlockKind::Parser && self.eat_kw("state") {
                states.push(self.state()?);
                continue;
            }
            if kind == BlockKind::Control && self.eat_kw("apply") {
                let apply = self.block_stmts()?;
                self.annotations()?;
                self.expect("}")?;
                return Ok(Decl::Control { name, params, locals, apply });
            }
            if !states.is_empty() {
                return self.err("'state' or '}' (declarations come before the states)");
            }
            locals.push(self.local(kind)?);
        }
    }

    fn local(&mut self, kind: BlockKind) -> Result<Local> {
        if self.eat_kw("const") {
            let (ty, name, value) = self.const_rest()?;
            return Ok(Local::Const { ty, name, value });
        }
        if self.is_kw("action") {
            if kind == BlockKind::Parser {
                return Err(Diagnostic::new(self.pos(), "an action belongs in a control, not a parser"));
            }
            self.bump();
            return Ok(Local::Action(self.action_rest()?));
        }
        if self.is_kw("table") {
            if kind == BlockKind::Parser {
                return Err(Diagnostic::new(self.pos(), "a table belongs in a control, not a parser"));
            }
            self.bump();
            return Ok(Local::Table(self.table()?));
        }
        if self.is_kw("value_set") {
            if kind == BlockKind::Control {
                return Err(Diagnostic::new(self.pos(), "a value_set belongs in a parser, not a control"));
            }
            self.bump();
            return Ok(Local::ValueSet(self.value_set_rest()?));
        }
        let start = self.i;
        let ty = self.ty_or_stack()?;
        if self.is("(") {
            self.i = start;
            return Ok(Local::Instance(self.instance()?));
        }
        let name = self.name("a name for the variable")?;
        let init = if self.eat("=") { Some(self.expr()?) } else { None };
        self.expect(";")?;
        Ok(Local::Var { ty, name, init })
    }

    /// After `value_set`: `<T>(size) name;`.
    fn value_set_rest(&mut self) -> Result<ValueSet> {
        let annotations = self.take_annotations();
        self.expect("<")?;
        let ty = self.ty()?;
        self.expect(">")?;
        self.expect("(")?;
        let size = self.expr()?;
        self.expect(")")?;
        let name = self.name("the value set's name")?;
        self.expect(";")?;
        Ok(ValueSet { ty, size, name, annotations })
    }

    /// `Type(args) name;`
    fn instance(&mut self) -> Result<Instance> {
        let annotations = self.take_annotations();
        let ty = self.ty()?;
        if !self.is("(") {
            return self.err("'(' (an instance: Type(arguments) name;)");
        }
        let args = self.args()?;
        let name = self.name("the instance's name")?;
        self.expect(";")?;
        Ok(Instance { ty, args, name, annotations })
    }

    /// After `action`: `name(params) { body }`.
    fn action_rest(&mut self) -> Result<Action> {
        let annotations = self.take_annotations();
        let name = self.name("the action's name")?;
        let params = self.params()?;
        let body = self.block_stmts()?;
        Ok(Action { name, params, body, annotations })
    }

    fn state(&mut self) -> Result<State> {
        let name = self.name("the state's name")?;
        self.expect("{")?;
        let mut body = Vec::new();
        loop {
            self.annotations()?;
            if self.eat_kw("transition") {
                break;
            }
            if self.is("}") {
                return self.err("'transition' (every state but accept and reject ends in one)");
            }
            body.push(self.stmt()?);
        }
        let transition = if self.eat_kw("select") {
            self.expect("(")?;
            let mut exprs = vec![self.expr()?];
            while self.eat(",") {
                exprs.push(self.expr()?);
            }
            self.expect(")")?;
            self.expect("{")?;
            let mut cases = Vec::new();
            while !self.eat("}") {
                let keys = self.keysets()?;
                self.expect(":")?;
                let next = self.name("the next state")?;
                self.expect(";")?;
                cases.push(SelectCase { keys, next });
            }
            Transition::Select { exprs, cases }
        } else {
            let next = self.name("the next state, or select")?;
            self.expect(";")?;
            Transition::Goto(next)
        };
        self.expect("}")?;
        Ok(State { name, body, transition })
    }

    /// One keyset, or a parenthesised list of them.
    fn keysets(&mut self) -> Result<Vec<Keyset>> {
        if self.eat("(") {
            let mut keys = vec![self.keyset()?];
            while self.eat(",") {
                keys.push(self.keyset()?);
            }
            self.expect(")")?;
            return Ok(keys);
        }
        Ok(vec![self.keyset()?])
    }

    fn keyset(&mut self) -> Result<Keyset> {
        if self.eat_kw("default") {
            return Ok(Keyset::Default);
        }
        if self.eat_kw("_") {
            return Ok(Keyset::DontCare);
        }
        let e = self.expr()?;
        if self.eat("&&&") {
            return Ok(Keyset::Mask(e, self.expr()?));
        }
        if self.eat("..") {
            return Ok(Keyset::Range(e, self.expr()?));
        }
        Ok(Keyset::Value(e))
    }

    fn table(&mut self) -> Result<Table> {
        let annotations = self.take_annotations();
        let name = self.name("the table's name")?;
        self.expect("{")?;
        let mut t = Table {
            name,
            keys: Vec::new(),
            actions: Vec::new(),
            has_actions: false,
            default_action: None,
            size: None,
            entries: Vec::new(),
            entries_const: false,
            properties: Vec::new(),
            property_annotations: Vec::new(),
            annotations,
        };
        while !self.eat("}") {
            self.annotations()?;
            let is_const = self.eat_kw("const");
            let prop = self.member_name()?;
            self.expect("=")?;
            match prop.text.as_str() {
                "key" => {
                    self.expect("{")?;
                    while !self.eat("}") {
                        let expr = self.expr()?;
                        self.expect(":")?;
                        let match_kind = self.name("a match kind (exact, ternary, lpm)")?;
                        self.annotations()?;
                        self.expect(";")?;
                        let annotations = self.take_annotations();
                        t.keys.push(Key { expr, match_kind, annotations });
                    }
                }
                "actions" => {
                    t.has_actions = true;
                    self.expect("{")?;
                    while !self.eat("}") {
                        self.annotations()?;
                        let r = self.action_ref()?;
                        self.expect(";")?;
                        t.actions.push(r);
                    }
                }
                "default_action" => {
                    let r = self.action_ref()?;
                    self.expect(";")?;
                    t.default_action = Some((r, is_const));
                }
                "size" => {
                    t.size = Some(self.expr()?);
                    self.expect(";")?;
                }
                "entries" => {
                    t.entries_const = is_const;
                    self.expect("{")?;
                    while !self.eat("}") {
                        let pos = self.pos();
                        let keys = self.keysets()?;
                        self.expect(":")?;
                        let action = self.action_ref()?;
                        self.annotations()?;
                        let priority = annotation_int(&self.take_annotations(), "priority");
                        self.expect(";")?;
                        t.entries.push(Entry { keys, action, pos, priority });
                    }
                }
                _ => {
                    let annotations = self.take_annotations();
                    let value = self.expr()?;
                    self.expect(";")?;
                    if !annotations.is_empty() {
                        t.property_annotations.push((prop.text.clone(), annotations));
                    }
                    t.properties.push((prop, value));
                }
            }
        }
        Ok(t)
    }

    /// `name` or `name(args)`.
    fn action_ref(&mut self) -> Result<ActionRef> {
        let name = self.name("an action's name")?;
        let args = if self.is("(") { self.args()? } else { Vec::new() };
        Ok(ActionRef { name, args })
    }

    fn args(&mut self) -> Result<Vec<Expr>> {
        self.expect("(")?;
        let mut args = Vec::new();
        if self.eat(")") {
            return Ok(args);
        }
        loop {
            if matches!(self.peek(), Tok::Ident(_)) && matches!(self.peek_at(1), Tok::Punct("=")) {
                return Err(Diagnostic::new(self.pos(), outside("named arguments")));
            }
            args.push(self.expr()?);
            if self.eat(")") {
                return Ok(args);
            }
            self.expect(",")?;
        }
    }

    /// `{ statements }`
    fn block_stmts(&mut self) -> Result<Vec<Stmt>> {
        self.expect("{")?;
        let mut stmts = Vec::new();
        while !self.eat("}") {
            self.annotations()?;
            stmts.push(self.stmt()?);
        }
        Ok(stmts)
    }

    /// A statement as a body: a block's statements, or the one statement.
    fn body(&mut self) -> Result<Vec<Stmt>> {
        if self.is("{") {
            self.block_stmts()
        } else {
            Ok(vec![self.stmt()?])
        }
    }

    /// Whether a declaration starts here rather than an expression.
    fn starts_declaration(&self) -> bool {
        match self.peek() {
            Tok::Ident(s) if ["bit", "int", "bool", "varbit", "tuple"].contains(&s.as_str()) => true,
            Tok::Ident(s) if KEYWORDS.contains(&s.as_str()) => false,
            // `T[n] name;`: a header stack.
            Tok::Ident(_) if matches!(self.peek_at(1), Tok::Punct("[")) => {
                matches!((self.peek_at(3), self.peek_at(4)), (Tok::Punct("]"), Tok::Ident(_)))
            }
            Tok::Ident(_) => matches!(self.peek_at(1), Tok::Ident(_) | Tok::Punct("<")),
            _ => false,
        }
    }

    fn stmt(&mut self) -> Result<Stmt> {
        let pos = self.pos();
        if self.eat(";") {
            return Ok(Stmt::Empty);
        }
        if self.is("{") {
            return Ok(Stmt::Block(self.block_stmts()?));
        }
        if self.eat_kw("if") {
            self.expect("(")?;
            let cond = self.expr()?;
            self.expect(")")?;
            let then = self.body()?;
            let otherwise = if self.eat_kw("else") { Some(self.body()?) } else { None };
            return Ok(Stmt::If { cond, then, otherwise });
        }
        if self.eat_kw("switch") {
            self.expect("(")?;
            let expr = self.expr()?;
            self.expect(")")?;
            self.expect("{")?;
            let mut cases = Vec::new();
            while !self.eat("}") {
                let mut labels = vec![self.member_name()?];
                self.expect(":")?;
                while !self.is("{") && !self.is("}") {
                    labels.push(self.member_name()?);
                    self.expect(":")?;
                }
                let body = if self.is("{") { Some(self.block_stmts()?) } else { None };
                cases.push((labels, body));
            }
            return Ok(Stmt::Switch { expr, cases, pos });
        }
        if self.eat_kw("return") {
            if !self.is(";") {
                let value = self.expr()?;
                self.expect(";")?;
                return Ok(Stmt::ReturnValue(value, pos));
            }
            self.expect(";")?;
            return Ok(Stmt::Return(pos));
        }
        if self.eat_kw("exit") {
            self.expect(";")?;
            return Ok(Stmt::Exit(pos));
        }
        if self.eat_kw("break") {
            self.expect(";")?;
            return Ok(Stmt::Break(pos));
        }
        if self.eat_kw("continue") {
            self.expect(";")?;
            return Ok(Stmt::Continue(pos));
        }
        if self.eat_kw("for") {
            self.expect("(")?;
            let mut init = Vec::new();
            while !self.eat(";") {
                init.push(self.simple_stmt()?);
                if !self.eat(",") && !self.is(";") {
                    return self.err("',' or ';'");
                }
            }
            let cond = if self.is(";") { None } else { Some(self.expr()?) };
            self.expect(";")?;
            let mut update = Vec::new();
            while !self.eat(")") {
                update.push(self.simple_stmt()?);
                if !self.eat(",") && !self.is(")") {
                    return self.err("',' or ')'");
                }
            }
            let body = self.body()?;
            return Ok(Stmt::For { init, cond, update, body, pos });
        }
        if self.eat_kw("const") {
            let (ty, name, value) = self.const_rest()?;
            return Ok(Stmt::Const { ty, name, value });
        }
        if self.is_kw("table") || self.is_kw("action") {
            return Err(Diagnostic::new(pos, "tables and actions are declared before the apply block"));
        }
        if self.starts_declaration() {
            let ty = self.ty_or_stack()?;
            let name = self.name("a name for the variable")?;
            let init = if self.eat("=") { Some(self.expr()?) } else { None };
            self.expect(";")?;
            return Ok(Stmt::Var { ty, name, init });
        }
        let target = self.expr()?;
        if self.eat("=") {
            let value = self.expr()?;
            self.expect(";")?;
            return Ok(Stmt::Assign { target, value });
        }
        // `a op= b`: `a = a op b`.
        let compound = if self.shr_assignment() {
            Some((BinOp::Shr, 1))
        } else {
            self.binop().filter(|(_, _, n)| self.compound_assignment(*n)).map(|(op, _, n)| (op, n))
        };
        if let Some((op, n)) = compound {
            for _ in 0..=n {
                self.bump();
            }
            let rhs = self.expr()?;
            self.expect(";")?;
            let value = Expr { kind: ExprKind::Binary(op, Box::new(target.clone()), Box::new(rhs)), pos: target.pos };
            return Ok(Stmt::Assign { target, value });
        }
        if !matches!(target.kind, ExprKind::Call { .. }) {
            return self.err("'=' or a call (an expression alone does nothing)");
        }
        self.expect(";")?;
        Ok(Stmt::Call(target))
    }

    /// A `for`'s initialiser or update: a variable with its value, an assignment (compound too)
    /// or a call, without the `;`.
    fn simple_stmt(&mut self) -> Result<Stmt> {
        if self.starts_declaration() {
            let ty = self.ty()?;
            let name = self.name("a name for the variable")?;
            self.expect("=")?;
            let init = Some(self.expr()?);
            return Ok(Stmt::Var { ty, name, init });
        }
        let target = self.expr()?;
        if self.eat("=") {
            return Ok(Stmt::Assign { target, value: self.expr()? });
        }
        let compound = if self.shr_assignment() {
            Some((BinOp::Shr, 1))
        } else {
            self.binop().filter(|(_, _, n)| self.compound_assignment(*n)).map(|(op, _, n)| (op, n))
        };
        if let Some((op, n)) = compound {
            for _ in 0..=n {
                self.bump();
            }
            let rhs = self.expr()?;
            let value = Expr { kind: ExprKind::Binary(op, Box::new(target.clone()), Box::new(rhs)), pos: target.pos };
            return Ok(Stmt::Assign { target, value });
        }
        if !matches!(target.kind, ExprKind::Call { .. }) {
            return self.err("'=' or a call");
        }
        Ok(Stmt::Call(target))
    }

    fn ty(&mut self) -> Result<Type> {
        let pos = self.pos();
        let word = match self.peek() {
            Tok::Ident(s) => s.clone(),
            _ => return self.err("a type"),
        };
        self.bump();
        let width = |p: &mut Parser, default: Option<u32>| -> Result<u32> {
            if !p.eat("<") {
                return default.ok_or_else(|| Diagnostic::new(p.pos(), format!("expected '<' (a width: {word}<N>)")));
            }
            let n = match p.peek() {
                Tok::Int { width: None, value } if (1..=128).contains(value) => *value as u32,
                Tok::Int { .. } => return Err(Diagnostic::new(p.pos(), "a width between 1 and 128 bits")),
                _ => return p.err("a width (a number of bits)"),
            };
            p.bump();
            p.expect(">")?;
            Ok(n)
        };
        Ok(match word.as_str() {
            "bit" => Type::Bit(width(self, Some(1))?),
            "int" if !self.is("<") => Type::Integer,
            "int" => Type::Int(width(self, None)?),
            "bool" => Type::Bool,
            "void" => Type::Void,
            "error" => Type::Error,
            "_" => Type::DontCare,
            "varbit" => {
                self.expect("<")?;
                let n = match self.peek() {
                    Tok::Int { width: None, value } if (1..=VARBIT_MAX as u128).contains(value) => *value as u32,
                    _ => {
                        return Err(Diagnostic::new(self.pos(), format!("a varbit's width is 1 to {VARBIT_MAX} bits")))
                    }
                };
                self.bump();
                self.expect(">")?;
                Type::Varbit(n)
            }
            "tuple" => {
                self.expect("<")?;
                let mut items = vec![self.ty()?];
                while self.eat(",") {
                    items.push(self.ty()?);
                }
                self.expect(">")?;
                Type::Tuple(items)
            }
            "string" => Type::Str,
            w if KEYWORDS.contains(&w) => {
                self.i -= 1;
                return self.err("a type");
            }
            _ => {
                let name = Name { text: word, pos };
                let mut args = Vec::new();
                if self.is("<") {
                    self.bump();
                    loop {
                        args.push(self.ty()?);
                        if self.eat(">") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Type::Named(name, args)
            }
        })
    }

    pub fn expr(&mut self) -> Result<Expr> {
        let cond = self.binary(0)?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            let pos = cond.pos;
            return Ok(Expr { kind: ExprKind::Cond(Box::new(cond), Box::new(a), Box::new(b)), pos });
        }
        Ok(cond)
    }

    /// The binary operator here, if any binds at `level` or tighter: (operator, its level, tokens).
    fn binop(&self) -> Option<(BinOp, u8, usize)> {
        let (op, level, n) = match self.peek() {
            Tok::Punct("||") => (BinOp::Or, 1, 1),
            Tok::Punct("&&") => (BinOp::And, 2, 1),
            Tok::Punct("==") => (BinOp::Eq, 3, 1),
            Tok::Punct("!=") => (BinOp::Ne, 3, 1),
            Tok::Punct("<") => (BinOp::Lt, 4, 1),
            Tok::Punct("<=") => (BinOp::Le, 4, 1),
            Tok::Punct(">=") => (BinOp::Ge, 4, 1),
            Tok::Punct(">") => {
                // Two `>` side by side are a shift.
                let (a, b) = (self.t[self.i].pos, self.t.get(self.i + 1).map(|t| t.pos));
                if matches!(self.peek_at(1), Tok::Punct(">")) && b == Some(Pos { col: a.col + 1, ..a }) {
                    (BinOp::Shr, 8, 2)
                } else {
                    (BinOp::Gt, 4, 1)
                }
            }
            Tok::Punct("|") => (BinOp::BitOr, 5, 1),
            Tok::Punct("^") => (BinOp::BitXor, 6, 1),
            Tok::Punct("&") => (BinOp::BitAnd, 7, 1),
            Tok::Punct("<<") => (BinOp::Shl, 8, 1),
            Tok::Punct("++") => (BinOp::Concat, 9, 1),
            Tok::Punct("+") => (BinOp::Add, 10, 1),
            Tok::Punct("-") => (BinOp::Sub, 10, 1),
            Tok::Punct("|+|") => (BinOp::AddSat, 10, 1),
            Tok::Punct("|-|") => (BinOp::SubSat, 10, 1),
            Tok::Punct("*") => (BinOp::Mul, 11, 1),
            Tok::Punct("/") => (BinOp::Div, 11, 1),
            Tok::Punct("%") => (BinOp::Mod, 11, 1),
            _ => return None,
        };
        Some((op, level, n))
    }

    fn binary(&mut self, min: u8) -> Result<Expr> {
        let mut lhs = self.unary()?;
        while let Some((op, level, n)) = self.binop() {
            if level <= min || self.compound_assignment(n) || self.shr_assignment() {
                break;
            }
            for _ in 0..n {
                self.bump();
            }
            let rhs = self.binary(level)?;
            let pos = lhs.pos;
            lhs = Expr { kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), pos };
        }
        Ok(lhs)
    }

    /// Whether the operator of `n` tokens here is followed, adjacent, by `=`: `a += b`.
    fn compound_assignment(&self, n: usize) -> bool {
        let (Some(last), Some(eq)) = (self.t.get(self.i + n - 1), self.t.get(self.i + n)) else { return false };
        let Tok::Punct(p) = last.tok else { return false };
        eq.tok == Tok::Punct("=") && eq.pos == Pos { col: last.pos.col + p.len() as u32, ..last.pos }
    }

    /// `>>=`, which the lexer reads as `>` and `>=` (`>>` is two `>`, for type arguments).
    fn shr_assignment(&self) -> bool {
        let (a, b) = (self.t[self.i].pos, self.t.get(self.i + 1).map(|t| t.pos));
        self.is(">") && matches!(self.peek_at(1), Tok::Punct(">=")) && b == Some(Pos { col: a.col + 1, ..a })
    }

    fn unary(&mut self) -> Result<Expr> {
        let pos = self.pos();
        let op = if self.eat("!") {
            Some(UnOp::Not)
        } else if self.eat("~") {
            Some(UnOp::Complement)
        } else if self.eat("-") {
            Some(UnOp::Neg)
        } else {
            None
        };
        if let Some(op) = op {
            let e = self.unary()?;
            return Ok(Expr { kind: ExprKind::Unary(op, Box::new(e)), pos });
        }
        if self.is("(") && self.is_cast() {
            self.bump();
            let ty = self.ty()?;
            self.expect(")")?;
            let e = self.unary()?;
            return Ok(Expr { kind: ExprKind::Cast(ty, Box::new(e)), pos });
        }
        self.postfix()
    }

    /// At `(`: whether a cast follows, `(bit<8>) x` or `(macAddr_t) x`, rather than a
    /// parenthesised expression.
    fn is_cast(&self) -> bool {
        match self.peek_at(1) {
            Tok::Ident(s) if ["bit", "int", "bool"].contains(&s.as_str()) => true,
            Tok::Ident(s) if !KEYWORDS.contains(&s.as_str()) => {
                matches!(self.peek_at(2), Tok::Punct(")"))
                    && matches!(
                        self.peek_at(3),
                        Tok::Ident(_) | Tok::Int { .. } | Tok::Punct("(") | Tok::Punct("~") | Tok::Punct("!")
                    )
            }
            _ => false,
        }
    }

    fn postfix(&mut self) -> Result<Expr> {
        let mut e = self.primary()?;
        loop {
            let pos = e.pos;
            if self.eat(".") {
                let member = self.member_name()?;
                e = Expr { kind: ExprKind::Member(Box::new(e), member), pos };
            } else if self.eat("[") {
                let a = self.expr()?;
                if self.eat(":") {
                    let b = self.expr()?;
                    self.expect("]")?;
                    e = Expr { kind: ExprKind::Slice(Box::new(e), Box::new(a), Box::new(b)), pos };
                } else {
                    self.expect("]")?;
                    e = Expr { kind: ExprKind::Index(Box::new(e), Box::new(a)), pos };
                }
            } else if self.is("(") {
                let args = self.args()?;
                e = Expr { kind: ExprKind::Call { callee: Box::new(e), type_args: Vec::new(), args }, pos };
            } else if self.is("<") && self.type_args_call() {
                self.bump();
                let mut type_args = Vec::new();
                loop {
                    type_args.push(self.ty()?);
                    if self.eat(">") {
                        break;
                    }
                    self.expect(",")?;
                }
                let args = self.args()?;
                e = Expr { kind: ExprKind::Call { callee: Box::new(e), type_args, args }, pos };
            } else {
                return Ok(e);
            }
        }
    }

    /// At `<` after a name: whether type arguments and a call follow (`lookahead<bit<8>>()`)
    /// rather than a comparison. Tried on a copy of the position.
    fn type_args_call(&mut self) -> bool {
        let start = self.i;
        self.bump();
        let mut ok = false;
        while self.ty().is_ok() {
            if self.eat(">") {
                ok = self.is("(");
                break;
            }
            if !self.eat(",") {
                break;
            }
        }
        self.i = start;
        ok
    }

    fn primary(&mut self) -> Result<Expr> {
        let pos = self.pos();
        let kind = match self.peek().clone() {
            Tok::Int { width, value } => {
                self.bump();
                ExprKind::Int { width, value }
            }
            Tok::Str(s) => {
                self.bump();
                ExprKind::Str(s)
            }
            Tok::Ident(s) if s == "true" || s == "false" => {
                self.bump();
                ExprKind::Bool(s == "true")
            }
            Tok::Ident(s) if s == "_" => {
                self.bump();
                ExprKind::DontCare
            }
            Tok::Ident(s) if s == "error" => {
                // `error.NoMatch`: the error type's members.
                self.bump();
                ExprKind::Name(s)
            }
            Tok::Ident(s) if s == "this" => return Err(Diagnostic::new(pos, outside("'this' references"))),
            Tok::Ident(s) if KEYWORDS.contains(&s.as_str()) => return self.err("an expression"),
            Tok::Ident(s) => {
                self.bump();
                ExprKind::Name(s)
            }
            Tok::Punct(".") => {
                self.bump();
                ExprKind::TopName(self.name("a name after '.'")?.text)
            }
            Tok::Punct("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect(")")?;
                return Ok(e);
            }
            Tok::Punct("{") => {
                self.bump();
                let mut items = Vec::new();
                if !self.eat("}") {
                    loop {
                        items.push(self.expr()?);
                        if self.eat("}") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                ExprKind::List(items)
            }
            _ => return self.err("an expression"),
        };
        Ok(Expr { kind, pos })
    }
}
