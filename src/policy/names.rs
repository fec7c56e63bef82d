//! The variable names a rule's condition can reach: every dotted name it writes and each of
//! that name's prefixes (`tool.annotations.readOnlyHint` reaches `tool`, `tool.annotations`
//! and itself, which is every name the evaluator may resolve it to). A decision adds only
//! these to its scope: a variable no rule can reach cannot change a verdict, and each one
//! added costs a conversion into the evaluator's values.

use std::collections::HashSet;

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr};

/// Adds to `names` every variable name `expression` can reach.
pub fn reachable(expression: &IdedExpr, names: &mut HashSet<String>) {
    match &expression.expr {
        Expr::Ident(name) => {
            names.insert(name.clone());
        }
        Expr::Select(select) => {
            if let Some(mut chain) = dotted(&select.operand) {
                chain.push('.');
                chain.push_str(&select.field);
                names.insert(chain);
            }
            reachable(&select.operand, names);
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
