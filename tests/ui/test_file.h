// SPDX-License-Identifier: MIT
#pragma once
// A file a GUI test writes for a dialog to read (a regions list, an advice JSON).
#include <QByteArray>
#include <QFile>
#include <QString>
#include <QTemporaryDir>

/// `bytes` written to `name` in `dir`; the file's path.
inline QString writeTestFile(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
    const QString p = dir.filePath(name);
    QFile f(p);
    if (f.open(QIODevice::WriteOnly)) f.write(bytes);
    return p;
}
