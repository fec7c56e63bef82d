//! The variable names a rule's condition can reach: every dotted name it writes and each of
//! that name's prefixes (`tool.annotations.readOnlyHint` reaches `tool`, `tool.annotations`
//! and itself, which is every name the evaluator may resolve it to). A decision adds only
//! these to its scope: a variable no rule can reach cannot change a verdict, and each one
//! added costs a conversion into the evaluator's values. Likewise `arguments`: when every
//! rule names the fields it reads (`arguments.path`, `has(arguments.region)`), only those
//! fields are converted; a rule that uses the map itself (`'path' in arguments`,
//! `arguments[key]`, `size(arguments)`) gets all of it.

use std::collections::HashSet;

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr};

/// Added to the names when a rule uses `arguments` as a whole (not a CEL name, so no rule
/// can write it).
pub const WHOLE_ARGUMENTS: &str = "arguments[*]";

/// The names some rules can reach, and what that means for `arguments`.
#[derive(Debug, Default)]
pub struct Reach {
    names: HashSet<String>,
    /// The top-level fields of `arguments` the rules name, when none uses it whole.
    argument_fields: Vec<String>,
}

impl Reach {
    pub fn new(names: HashSet<String>) -> Reach {
        let mut argument_fields: Vec<String> = names
            .iter()
            .filter_map(|name| name.strip_prefix("arguments."))
            .filter(|field| !field.contains('.'))
            .map(str::to_owned)
            .collect();
        argument_fields.sort_unstable();
        Reach {
            names,
            argument_fields,
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Whether some rule uses `arguments` itself, so that all of it must be converted.
    pub fn whole_arguments(&self) -> bool {
        self.names.contains(WHOLE_ARGUMENTS)
    }

    /// The fields of `arguments` the rules name (all they can reach, unless
    /// `whole_arguments`).
    pub fn argument_fields(&self) -> &[String] {
        &self.argument_fields
    }

    #[cfg(test)]
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.names.iter()
    }
}

/// Adds to `names` every variable name `expression` can reach.
pub fn reachable(expression: &IdedExpr, names: &mut HashSet<String>) {
    match &expression.expr {
        Expr::Ident(name) => {
            // Not the operand of a selection: the variable itself is used.
            if name == "arguments" {
                names.insert(WHOLE_ARGUMENTS.to_owned());
            }
            names.insert(name.clone());
        }
        Expr::Select(select) => {
            if let Some(mut chain) = dotted(&select.operand) {
                chain.push('.');
                chain.push_str(&select.field);
                names.insert(chain);
            }
            match &select.operand.expr {
                // `arguments.path`: only the field is read.
                Expr::Ident(name) => {
                    names.insert(name.clone());
                }
                _ => reachable(&select.operand, names),
            }
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                reachable(target, names);
            }
            call.args.iter().for_each(|arg| reachable(arg, names));
        }
        Expr::Comprehension(comprehension) => {
            for part in [
                &comprehension.iter_range,
                &comprehension.accu_init,
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ] {
                reachable(part, names);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(|e| reachable(e, names)),
        Expr::Map(map) => map.entries.iter().for_each(|e| entry(&e.expr, names)),
        Expr::Struct(structure) => structure.entries.iter().for_each(|e| entry(&e.expr, names)),
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry(entry: &EntryExpr, names: &mut HashSet<String>) {
    match entry {
        EntryExpr::StructField(field) => reachable(&field.value, names),
        EntryExpr::MapEntry(pair) => {
            reachable(&pair.key, names);
            reachable(&pair.value, names);
        }
    }
}

/// `a.b.c` for a chain of plain selections on an identifier; `None` for anything else.
fn dotted(expression: &IdedExpr) -> Option<String> {
    match &expression.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => {
            let mut chain = dotted(&select.operand)?;
            chain.push('.');
            chain.push_str(&select.field);
            Some(chain)
        }
        _ => None,
    }
}
