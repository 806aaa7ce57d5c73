// SPDX-License-Identifier: MIT
#pragma once
// The run browser's rows (runs, training runs and replays of the database).

#include <string>
#include <vector>

#include "ampscope/storage/store.h"
#include "tablemodel.h"

namespace ampscope::ui {

/// The run browser's rows.
class RunListModel : public TableModel {
    Q_OBJECT
public:
    enum Columns { Started, Model, Device, Passes, Status, Verdict, Review, Notes, Id, NUM_COLUMNS };
    enum Roles { UuidRole = Qt::UserRole, SortRole };
    explicit RunListModel(QObject* parent = nullptr);
    void resetData(std::vector<storage::RunRow> rows);
    void clearData() { resetData({}); }
    /// Adds the run, or updates its row in place (a live run: started, then finished).
    void upsert(const storage::RunRow& row);
    const storage::RunRow* row(int r) const;
    /// The row of run `uuid`, or null.
    const storage::RunRow* find(const std::string& uuid) const;
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(rows_.size()); }

private:
    std::vector<storage::RunRow> rows_;
};

}  // namespace ampscope::ui
