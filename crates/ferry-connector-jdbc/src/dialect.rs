//! PostgreSQL's SQL for the sink, as Confluent's `PostgreSqlDatabaseDialect` writes it:
//! identifiers, column types of Connect schemas (auto.create, auto.evolve), the insert, upsert,
//! update and delete statements with `$n` parameters, and the offsets table that fences a
//! zombie task at the database (docs/design.md#the-jdbc-sink). Pure: no connection here.

use ferry_connect::{ConnectError, Logical, Result, Schema, SchemaType};

/// A table, optionally schema-qualified (`schema.table` in `table.name.format`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableId {
    /// The schema, if named.
    pub schema: Option<String>,
    /// The table's name.
    pub table: String,
}

impl TableId {
    /// `table` or `schema.table`; empty parts are an error naming the name.
    pub fn parse(name: &str) -> Result<TableId> {
        let bad =
            || ConnectError::config("table.name.format", format!("{name:?} is not a table name"));
        match name.split_once('.') {
            Some((schema, table))
                if !schema.is_empty() && !table.is_empty() && !table.contains('.') =>
            {
                Ok(TableId {
                    schema: Some(schema.to_string()),
                    table: table.to_string(),
                })
            }
            Some(_) => Err(bad()),
            None if name.is_empty() => Err(bad()),
            None => Ok(TableId {
                schema: None,
                table: name.to_string(),
            }),
        }
    }
}

/// How identifiers are written (`quote.sql.identifiers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dialect {
    /// Whether identifiers are quoted.
    pub quote: bool,
}

impl Dialect {
    /// An identifier, double-quoted (inner quotes doubled) unless quoting is off.
    pub fn ident(&self, name: &str) -> String {
        if self.quote {
            format!("\"{}\"", name.replace('"', "\"\""))
        } else {
            name.to_string()
        }
    }

    /// A table's name as SQL (schema-qualified if it has a schema).
    pub fn table(&self, t: &TableId) -> String {
        match &t.schema {
            Some(s) => format!("{}.{}", self.ident(s), self.ident(&t.table)),
            None => self.ident(&t.table),
        }
    }

    fn columns(&self, names: &[String]) -> String {
        names
            .iter()
            .map(|n| self.ident(n))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `INSERT INTO t (a, b) VALUES ($1, $2)`.
    pub fn insert(&self, t: &TableId, columns: &[String]) -> String {
        format!(
            "INSERT INTO {} ({}) VALUES ({})",
            self.table(t),
            self.columns(columns),
            params(1, columns.len())
        )
    }

    /// Insert, or update the non-key columns where the key exists (nothing to update: leave
    /// the row). Parameters: keys, then the other columns.
    pub fn upsert(&self, t: &TableId, keys: &[String], others: &[String]) -> String {
        let all: Vec<String> = keys.iter().chain(others).cloned().collect();
        let action = if others.is_empty() {
            "DO NOTHING".to_string()
        } else {
            let sets: Vec<String> = others
                .iter()
                .map(|c| format!("{0}=EXCLUDED.{0}", self.ident(c)))
                .collect();
            format!("DO UPDATE SET {}", sets.join(", "))
        };
        format!(
            "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) {action}",
            self.table(t),
            self.columns(&all),
            params(1, all.len()),
            self.columns(keys)
        )
    }

    /// `UPDATE t SET c=$1 WHERE k=$2`: parameters are the other columns, then the keys.
    pub fn update(&self, t: &TableId, keys: &[String], others: &[String]) -> String {
        let sets: Vec<String> = others
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{} = ${}", self.ident(c), i + 1))
            .collect();
        format!(
            "UPDATE {} SET {} WHERE {}",
            self.table(t),
            sets.join(", "),
            self.key_match(keys, others.len() + 1)
        )
    }

    /// `DELETE FROM t WHERE k=$1`.
    pub fn delete(&self, t: &TableId, keys: &[String]) -> String {
        format!(
            "DELETE FROM {} WHERE {}",
            self.table(t),
            self.key_match(keys, 1)
        )
    }

    fn key_match(&self, keys: &[String], first: usize) -> String {
        keys.iter()
            .enumerate()
            .map(|(i, k)| format!("{} = ${}", self.ident(k), first + i))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// `CREATE TABLE` for auto.create: every column with its type, NOT NULL where the
    /// schema is required, defaults of primitive fields, and the primary key.
    pub fn create_table(&self, t: &TableId, columns: &[Column], keys: &[String]) -> String {
        let mut parts: Vec<String> = columns.iter().map(|c| self.column_def(c)).collect();
        if !keys.is_empty() {
            parts.push(format!("PRIMARY KEY({})", self.columns(keys)));
        }
        format!("CREATE TABLE {} (\n{})", self.table(t), parts.join(",\n"))
    }

    /// `ALTER TABLE … ADD …` for auto.evolve (added columns must be optional or have a
    /// default, which the caller checks).
    pub fn add_columns(&self, t: &TableId, columns: &[Column]) -> String {
        let adds: Vec<String> = columns
            .iter()
            .map(|c| format!("ADD {}", self.column_def(c)))
            .collect();
        format!("ALTER TABLE {} {}", self.table(t), adds.join(", "))
    }

    fn column_def(&self, c: &Column) -> String {
        let mut def = format!("{} {}", self.ident(&c.name), c.sql_type);
        if let Some(default) = &c.default {
            def.push_str(&format!(" DEFAULT {default}"));
        }
        if !c.optional {
            def.push_str(" NOT NULL");
        }
        def
    }
}

/// `$first, …` for `n` parameters.
fn params(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A column to create or add.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// Its SQL type.
    pub sql_type: String,
    /// Whether it may be null.
    pub optional: bool,
    /// A SQL literal.
    pub default: Option<String>,
}

/// PostgreSQL's type for a Connect schema (Confluent's PostgreSQL dialect): the error names
/// the field.
pub fn sql_type(field: &str, schema: &Schema) -> Result<String> {
    if let Some(logical) = Logical::of(schema)? {
        return Ok(match logical {
            Logical::Decimal { .. } => "DECIMAL",
            Logical::Date => "DATE",
            Logical::Time => "TIME",
            Logical::Timestamp => "TIMESTAMP",
        }
        .to_string());
    }
    Ok(match schema.ty {
        SchemaType::Int8 | SchemaType::Int16 => "SMALLINT".to_string(),
        SchemaType::Int32 => "INT".to_string(),
        SchemaType::Int64 => "BIGINT".to_string(),
        SchemaType::Float32 => "REAL".to_string(),
        SchemaType::Float64 => "DOUBLE PRECISION".to_string(),
        SchemaType::Boolean => "BOOLEAN".to_string(),
        SchemaType::String => "TEXT".to_string(),
        SchemaType::Bytes => "BYTEA".to_string(),
        SchemaType::Array => {
            let element = schema.value_schema.as_ref().ok_or_else(|| {
                ConnectError::data(format!("field {field}: an array schema without its element schema"))
            })?;
            if matches!(element.ty, SchemaType::Array | SchemaType::Map | SchemaType::Struct) {
                return Err(ConnectError::data(format!(
                    "field {field}: PostgreSQL arrays hold primitive values, not {}",
                    element.ty.name()
                )));
            }
            format!("{}[]", sql_type(field, element)?)
        }
        SchemaType::Map | SchemaType::Struct => {
            return Err(ConnectError::data(format!(
                "field {field}: a {} has no column type (flatten it first, e.g. with the Flatten transform)",
                schema.ty.name()
            )))
        }
    })
}

/// The table that holds the sink's offsets in the destination database, one row per
/// (connector, topic, partition): written in the same transaction as the rows, and only by
/// the partition's current generation.
pub const OFFSETS_TABLE: &str = "__ferry_sink_offsets";

/// The table of the sink's offsets (created if it is not there).
pub fn create_offsets_table() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS \"{OFFSETS_TABLE}\" (\
         connector TEXT NOT NULL, topic TEXT NOT NULL, kafka_partition INT NOT NULL, \
         next_offset BIGINT NOT NULL, generation BIGINT NOT NULL, \
         PRIMARY KEY (connector, topic, kafka_partition))"
    )
}

/// The partition's row, locked until the transaction ends: `next_offset, generation`.
/// Parameters: connector, topic, partition.
pub fn lock_offsets() -> String {
    format!(
        "SELECT next_offset, generation FROM \"{OFFSETS_TABLE}\" \
         WHERE connector = $1 AND topic = $2 AND kafka_partition = $3 FOR UPDATE"
    )
}

/// Record the next offset for a generation at least the row's: no row changes for an older
/// one (a zombie), which the caller takes as fenced. Parameters: connector, topic,
/// partition, next offset, generation.
pub fn store_offsets() -> String {
    format!(
        "INSERT INTO \"{OFFSETS_TABLE}\" AS o (connector, topic, kafka_partition, next_offset, generation) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (connector, topic, kafka_partition) DO UPDATE \
         SET next_offset = EXCLUDED.next_offset, generation = EXCLUDED.generation \
         WHERE o.generation <= EXCLUDED.generation"
    )
}

/// The offsets of a connector's partitions of a topic, with the generation that wrote them.
/// Parameters: connector, topic.
pub fn read_offsets() -> String {
    format!(
        "SELECT kafka_partition, next_offset, generation FROM \"{OFFSETS_TABLE}\" WHERE connector = $1 AND topic = $2"
    )
}

#[cfg(test)]
mod tests;
