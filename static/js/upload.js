// Uploads files and folders from the browser through the files API's chunked, resumable protocol
// (/api/v1/files/uploads: start with the whole file's XXH3-128, PUT each chunk with its own, complete);
// an upload interrupted midway is found again by path and only its missing chunks are sent.
(function () {
  const PIECE = 4 * 1024 * 1024;  // bytes hashed at a time: a file is never read whole into memory

  function csrf() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  async function call(url, options) {
    const response = await fetch(url, {
      credentials: "same-origin",
      ...options,
      headers: { "X-CSRFToken": csrf(), Accept: "application/json", ...(options && options.headers) },
    });
    const text = await response.text();
    const data = text ? JSON.parse(text) : {};
    if (!response.ok) {
      const detail = (data.errors || []).map((e) => `${e.field}: ${e.message}`).join("; ") || data.detail;
      throw new Error(detail || `HTTP ${response.status}`);
    }
    return { status: response.status, data };
  }

  async function hashOf(blob, onBytes) {
    const hasher = await hashwasm.createXXHash128();
    hasher.init();
    for (let offset = 0; offset < blob.size; offset += PIECE) {
      hasher.update(new Uint8Array(await blob.slice(offset, offset + PIECE).arrayBuffer()));
      if (onBytes) onBytes(Math.min(PIECE, blob.size - offset));
    }
    return `xxh3_128:${hasher.digest("hex")}`;
  }

  function expand(spans) {
    const out = [];
    (spans || []).forEach(([start, stop]) => { for (let i = start; i < stop; i += 1) out.push(i); });
    return out;
  }

  async function findOpen(api, path, size, checksum) {
    const query = new URLSearchParams({ path, state: "open" });
    const { data } = await call(`${api}?${query}`);
    const match = (data.results || []).find((u) => u.size === size && u.checksum === checksum);
    return match ? (await call(`${api}/${match.id}`)).data : null;
  }

  // Upload one File to the logical `path`; onBytes(n) is called as bytes are hashed and sent.
  async function uploadFile(api, file, path, onBytes) {
    const checksum = await hashOf(file, (n) => onBytes(n / 2));
    let upload = await findOpen(api, path, file.size, checksum);
    if (!upload) upload = (await call(api, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ path, size: file.size, checksum }),
    })).data;
    const todo = new Set(expand(upload.missing).concat(expand(upload.wrong)));
    for (let index = 0; index < upload.chunks; index += 1) {
      const chunk = file.slice(index * upload.chunk_size, (index + 1) * upload.chunk_size);
      if (!todo.has(index)) { onBytes(chunk.size / 2); continue; }
      const chunkSum = await hashOf(chunk);
      await call(`${api}/${upload.id}/chunks/${index}`, {
        method: "PUT", headers: { "Content-Type": "application/octet-stream", "X-Chunk-Checksum": chunkSum }, body: chunk,
      });
      onBytes(chunk.size / 2);
    }
    let done = await call(`${api}/${upload.id}/complete`, { method: "POST" });
    while (done.data.state === "verifying") {
      await new Promise((resolve) => setTimeout(resolve, 500));
      done = await call(`${api}/${upload.id}`);
    }
    if (done.data.state !== "completed") throw new Error(`${path}: ${done.data.error || done.data.state}`);
  }

  // Upload `files` (a FileList; a folder's files carry webkitRelativePath) below the folder `target`;
  // with `contentsOnly`, a chosen folder's files go to `target` itself (not to target/<folder name>).
  async function uploadFiles(api, files, target, progress, status, contentsOnly) {
    const list = Array.from(files);
    const total = list.reduce((sum, f) => sum + f.size, 0) || 1;
    let sent = 0;
    progress.hidden = false;
    progress.value = 0;
    const onBytes = (n) => { sent += n; progress.value = Math.min(100, (100 * sent) / total); };
    for (const [i, file] of list.entries()) {
      let relative = file.webkitRelativePath || file.name;
      if (contentsOnly && file.webkitRelativePath) relative = relative.slice(relative.indexOf("/") + 1);
      status.textContent = `${i + 1}/${list.length}: ${relative}`;
      await uploadFile(api, file, `${target.replace(/\/$/, "")}/${relative}`, onBytes);
    }
    progress.value = 100;
    status.textContent = `uploaded ${list.length} file${list.length === 1 ? "" : "s"}`;
  }

  window.PaddleUpload = { uploadFiles };

  // The submit form: a folder chosen here is copied into <home>/jobs/<job name>/, the job's own folder,
  // as `paddlectl submit DIR` does (the job may write there: a subfolder would be read-only to it).
  const picker = document.getElementById("package-picker");
  if (picker) {
    const input = document.getElementById("package-upload");
    input.addEventListener("change", async () => {
      const status = document.getElementById("package-status");
      const progress = document.getElementById("package-progress");
      const datacenter = document.getElementById("id_datacenter").value;
      const home = datacenter ? `/pfs/${datacenter}/home/${picker.dataset.user}` : "";
      const jobname = document.getElementById("id_jobname").value.trim();
      if (!jobname || !home) { status.textContent = "choose the datacenter and enter the job name first: the folder goes to jobs/<job name>/"; input.value = ""; return; }
      const target = `${home}/jobs/${jobname}`;
      try {
        await uploadFiles(picker.dataset.uploads, input.files, target, progress, status, true);
        document.getElementById("id_package").value = target;
      } catch (error) {
        status.textContent = `upload failed: ${error.message} (choose the folder again to resume)`;
      }
    });
  }

  // The file browser: upload files or a folder into the folder shown, then show the new listing.
  const browser = document.getElementById("file-upload");
  if (browser) {
    const progress = document.getElementById("upload-progress");
    const status = document.getElementById("upload-status");
    browser.querySelectorAll("input[type=file]").forEach((input) => input.addEventListener("change", async () => {
      try {
        await uploadFiles(browser.dataset.uploads, input.files, browser.dataset.path, progress, status);
        window.location.reload();
      } catch (error) {
        status.textContent = `upload failed: ${error.message} (choose the files again to resume)`;
      }
    }));
  }
})();
