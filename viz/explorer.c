// explorer.c: writes the explorer page: a fixed HTML/JavaScript shell with
// the model's data as one JSON object in a script element.
#include "explorer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/files.h"
#include "heatmap.h"

static void base64_floats(FILE *out, const float *values, size_t n) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *bytes = (const unsigned char *)values; // little-endian (x86, ARM)
    size_t len = n * sizeof(float);
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)bytes[i] << 16;
        if (i + 1 < len) v |= (unsigned)bytes[i + 1] << 8;
        if (i + 2 < len) v |= bytes[i + 2];
        fputc(digits[(v >> 18) & 63], out);
        fputc(digits[(v >> 12) & 63], out);
        fputc(i + 1 < len ? digits[(v >> 6) & 63] : '=', out);
        fputc(i + 2 < len ? digits[v & 63] : '=', out);
    }
}

static void json_number(FILE *out, double v) {
    if (isnan(v) || isinf(v)) fputs("null", out);
    else fprintf(out, "%.6g", v);
}

// The shell: the data goes where DATA stands.
static const char *const page_head =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n"
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
    "<title>attention explorer</title>\n<style>\n"
    "body{font-family:sans-serif;margin:12px;color:#222}\n"
    "#bar{display:flex;gap:16px;align-items:center;flex-wrap:wrap}\n"
    "#main{display:flex;gap:16px;align-items:flex-start;margin-top:8px}\n"
    "#readout{font-family:monospace;min-height:1.4em;margin:6px 0;white-space:pre}\n"
    "#text{font-family:monospace;font-size:15px;line-height:1.7;max-width:720px;word-break:break-all}\n"
    "#text span{cursor:pointer;padding:0 1px}\n#text span.sel{background:#fd6;outline:1px solid #c90}\n"
    "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 5px;text-align:right}\n"
    "tr.cur{background:#def}tr{cursor:pointer}\n.u{color:#888}\n"
    "</style></head><body>\n<script id=\"data\" type=\"application/json\">\n";

static const char *const page_tail =
    "\n</script>\n"
    "<div id=\"bar\"><b>attention explorer</b>\n"
    "<label>show <select id=\"pick\"></select></label>\n"
    "<span id=\"stepbox\"><label>snapshot <input id=\"step\" type=\"range\" min=\"0\" value=\"0\"></label>"
    " <span id=\"steplabel\"></span></span></div>\n"
    "<div id=\"readout\">hover a cell</div>\n"
    "<div id=\"main\"><div><canvas id=\"canvas\" width=\"10\" height=\"10\"></canvas>\n"
    "<div id=\"text\"></div></div>\n<div><table id=\"scores\"></table>\n"
    "<p class=\"u\">each score with its value for uniform attention over the same rows in grey</p></div></div>\n"
    "<script>\n"
    "'use strict';\n"
    "const D=JSON.parse(document.getElementById('data').textContent);\n"
    "const L=D.layers,NH=D.heads,cmap=D.colormap;\n"
    "function floats(b64){const s=atob(b64),u=new Uint8Array(s.length);"
    "for(let i=0;i<s.length;i++)u[i]=s.charCodeAt(i);return new Float32Array(u.buffer);}\n"
    "D.views.forEach(v=>{v.A=floats(v.attn);});\n"
    "const S={view:0,layer:-1,head:-1,sel:-1,q:-1,k:-1};\n"
    "const cv=document.getElementById('canvas'),cx=cv.getContext('2d');\n"
    "function shown(c){return c===32?'\\u2423':c===10?'\\u21b5':c===9?'\\u21e5':String.fromCodePoint(c);}\n"
    "function w(v,l,h,i,j){return v.A[((l*NH+h)*v.T+i)*v.T+j];}\n"
    "function color(x){const k=Math.max(0,Math.min(255,Math.round(x*255)));return '#'+cmap.substr(6*k,6);}\n"
    "function geom(){const v=D.views[S.view];if(S.layer<0){const t=Math.max(2,Math.floor(160/v.T));"
    "return {over:true,cell:t,tile:t*v.T+12,x0:60,y0:24};}"
    "return {over:false,cell:Math.max(4,Math.min(16,Math.floor(720/v.T))),x0:24,y0:24};}\n"
    "function draw(){const v=D.views[S.view],g=geom();\n"
    " if(g.over){cv.width=g.x0+NH*g.tile;cv.height=g.y0+L*g.tile;}else{cv.width=g.x0+v.T*g.cell+4;cv.height=g.y0+v.T*g.cell+4;}\n"
    " cx.fillStyle='#fff';cx.fillRect(0,0,cv.width,cv.height);cx.font='12px sans-serif';cx.fillStyle='#222';\n"
    " if(g.over){for(let l=0;l<L;l++){cx.fillStyle='#222';cx.fillText('layer '+l,4,g.y0+l*g.tile+g.tile/2);\n"
    "  for(let h=0;h<NH;h++){if(l===0)cx.fillText('head '+h,g.x0+h*g.tile,16);tile(v,l,h,g.x0+h*g.tile,g.y0+l*g.tile,g.cell);\n"
    "   const t=v.scores?D.tags[S.view][l*NH+h]:'';if(t){cx.fillStyle='#fff';cx.fillRect(g.x0+h*g.tile+g.cell*v.T-40,g.y0+l*g.tile,40,14);"
    "cx.fillStyle='#222';cx.fillText(t,g.x0+h*g.tile+g.cell*v.T-38,g.y0+l*g.tile+11);}}}return;}\n"
    " tile(v,S.layer,S.head,g.x0,g.y0,g.cell);cx.fillStyle='#222';cx.font=Math.max(8,g.cell-2)+'px monospace';\n"
    " for(let i=0;i<v.T;i++){cx.fillText(shown(v.chars[i]),g.x0+i*g.cell+1,g.y0-4);cx.fillText(shown(v.chars[i]),4,g.y0+(i+1)*g.cell-2);}\n"
    " if(S.sel>=0){cx.strokeStyle='#f40';cx.lineWidth=2;cx.strokeRect(g.x0,g.y0+S.sel*g.cell,v.T*g.cell,g.cell);"
    "cx.strokeRect(g.x0+S.sel*g.cell,g.y0,g.cell,v.T*g.cell);}\n"
    " if(S.q>=0){cx.strokeStyle='#fff';cx.lineWidth=1;cx.strokeRect(g.x0+S.k*g.cell+.5,g.y0+S.q*g.cell+.5,g.cell-1,g.cell-1);}}\n"
    "function tile(v,l,h,x0,y0,c){for(let i=0;i<v.T;i++)for(let j=0;j<v.T;j++){"
    "cx.fillStyle=j>i?((i+j)%2?'#b0b0b0':'#888'):color(w(v,l,h,i,j));cx.fillRect(x0+j*c,y0+i*c,c,c);}}\n"
    "function readout(l,h,i,j){const v=D.views[S.view],r=document.getElementById('readout');\n"
    " if(j>i){r.textContent='query '+i+' \\''+shown(v.chars[i])+'\\' cannot see key '+j+' (the future)';r.dataset.weight='';return;}\n"
    " const x=w(v,l,h,i,j);r.dataset.layer=l;r.dataset.head=h;r.dataset.q=i;r.dataset.k=j;r.dataset.weight=x.toFixed(6);\n"
    " r.textContent='layer '+l+' head '+h+': query \\''+shown(v.chars[i])+'\\' (position '+i+') -> key \\''+shown(v.chars[j])+'\\' (position '+j+'): weight '+x.toFixed(6);}\n"
    "cv.addEventListener('mousemove',e=>{const g=geom(),v=D.views[S.view],r=cv.getBoundingClientRect();\n"
    " const x=e.clientX-r.left,y=e.clientY-r.top;let l=S.layer,h=S.head,c=g.cell,x0=g.x0,y0=g.y0;\n"
    " if(g.over){h=Math.floor((x-g.x0)/g.tile);l=Math.floor((y-g.y0)/g.tile);if(h<0||l<0||h>=NH||l>=L)return;x0+=h*g.tile;y0+=l*g.tile;}\n"
    " const j=Math.floor((x-x0)/c),i=Math.floor((y-y0)/c);if(i<0||j<0||i>=v.T||j>=v.T)return;S.q=i;S.k=j;readout(l,h,i,j);if(!g.over)draw();});\n"
    "cv.addEventListener('click',e=>{const g=geom();if(!g.over)return;const r=cv.getBoundingClientRect();\n"
    " const h=Math.floor((e.clientX-r.left-g.x0)/g.tile),l=Math.floor((e.clientY-r.top-g.y0)/g.tile);if(h>=0&&l>=0&&h<NH&&l<L)select(l,h);});\n"
    "function select(l,h){S.layer=l;S.head=h;document.getElementById('pick').value=l<0?'o':l+','+h;S.q=-1;draw();table();}\n"
    "function text(){const v=D.views[S.view],t=document.getElementById('text');t.textContent='';\n"
    " v.chars.forEach((c,i)=>{const s=document.createElement('span');s.textContent=shown(c);s.title='position '+i;\n"
    "  if(i===S.sel)s.className='sel';s.onclick=()=>{S.sel=S.sel===i?-1:i;text();draw();};t.appendChild(s);});}\n"
    "function table(){const v=D.views[S.view],t=document.getElementById('scores');\n"
    " let s='<tr><th>layer</th><th>head</th>'+D.scoreTags.map((n,k)=>'<th title=\"'+D.scoreNames[k]+'\">'+n+'</th>').join('')+'<th>type</th></tr>';\n"
    " for(let h=0;h<L*NH;h++){const r=v.scores?v.scores[h]:null;s+='<tr data-h=\"'+h+'\"'+(S.layer*NH+S.head===h?' class=\"cur\"':'')+'><td>'+Math.floor(h/NH)+'</td><td>'+h%NH+'</td>';\n"
    "  for(let k=0;k<D.scoreNames.length;k++){const p=r?r[k]:null;s+='<td>'+(p&&p[0]!==null?p[0].toFixed(3)+' <span class=\"u\">'+p[1].toFixed(3)+'</span>':'-')+'</td>';}\n"
    "  s+='<td>'+(D.tags[S.view][h]||'')+'</td></tr>';}\n"
    " t.innerHTML=s;t.querySelectorAll('tr[data-h]').forEach(r=>r.onclick=()=>{const h=+r.dataset.h;select(Math.floor(h/NH),h%NH);});}\n"
    "function setView(n){S.view=n;const v=D.views[n];document.getElementById('step').value=n;\n"
    " document.getElementById('steplabel').textContent=v.label+(v.loss!==null?' (loss '+v.loss.toFixed(3)+')':'');\n"
    " S.sel=-1;S.q=-1;text();draw();table();}\n"
    "const pick=document.getElementById('pick');pick.add(new Option('overview','o'));\n"
    "for(let l=0;l<L;l++)for(let h=0;h<NH;h++)pick.add(new Option('layer '+l+' head '+h,l+','+h));\n"
    "pick.onchange=()=>{if(pick.value==='o')select(-1,-1);else{const p=pick.value.split(',');select(+p[0],+p[1]);}};\n"
    "const st=document.getElementById('step');st.max=D.views.length-1;st.oninput=()=>setView(+st.value);\n"
    "if(D.views.length<2)document.getElementById('stepbox').style.display='none';\n"
    "function fragment(){const f=new URLSearchParams(location.hash.slice(1));const n=x=>f.has(x)?parseInt(f.get(x),10):null;\n"
    " const v=n('view');setView(v!==null&&v>=0&&v<D.views.length?v:0);\n"
    " const l=n('layer'),h=n('head');if(l!==null&&h!==null&&l>=0&&l<L&&h>=0&&h<NH)select(l,h);else select(-1,-1);\n"
    " const q=n('q'),k=n('k'),V=D.views[S.view];if(q!==null&&k!==null&&S.layer>=0&&q>=0&&k>=0&&q<V.T&&k<V.T){S.q=q;S.k=k;readout(S.layer,S.head,q,k);draw();}}\n"
    "window.addEventListener('hashchange',fragment);fragment();\n"
    "document.body.dataset.resources=performance.getEntriesByType('resource').length;\n"
    "document.body.dataset.ready='1';\n"
    "</script></body></html>\n";

int explorer_write(const char *path, int L, int NH, const ExplorerView *views, int num_views,
                   char *err, size_t err_len) {
    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) return 0;
    FILE *out = af.file;
    fputs(page_head, out);
    fprintf(out, "{\"layers\":%d,\"heads\":%d,\"colormap\":\"", L, NH);
    for (int k = 0; k < HEATMAP_COLORS; k++) {
        uint8_t rgb[3];
        colormap_rgb(COLORMAP_VIRIDIS, k, rgb);
        fprintf(out, "%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
    }
    fputs("\",\"scoreNames\":[", out);
    for (int k = 0; k < NUM_SCORES; k++) fprintf(out, "%s\"%s\"", k ? "," : "", score_name(k));
    fputs("],\"scoreTags\":[", out);
    for (int k = 0; k < NUM_SCORES; k++) fprintf(out, "%s\"%s\"", k ? "," : "", score_tag(k));
    fputs("],\"tags\":[", out);
    for (int v = 0; v < num_views; v++) {
        fputs(v ? ",[" : "[", out);
        for (int h = 0; h < L * NH; h++) {
            int type = views[v].scores ? head_dominant_type(&views[v].scores[h]) : -1;
            fprintf(out, "%s\"%s\"", h ? "," : "", type >= 0 ? score_tag(type) : "");
        }
        fputs("]", out);
    }
    fputs("],\"views\":[", out);
    for (int v = 0; v < num_views; v++) {
        const ExplorerView *view = &views[v];
        fprintf(out, "%s\n{\"label\":\"", v ? "," : "");
        for (const char *c = view->label; *c; c++) // labels are plain ASCII from this program
            if (*c != '"' && *c != '\\' && *c != '<') fputc(*c, out);
        fprintf(out, "\",\"step\":%ld,\"loss\":", view->step);
        json_number(out, view->loss);
        fprintf(out, ",\"T\":%d,\"chars\":[", view->T);
        for (int i = 0; i < view->T; i++) fprintf(out, "%s%u", i ? "," : "", (unsigned)view->chars[i]);
        fputs("],\"scores\":", out);
        if (!view->scores) {
            fputs("null", out);
        } else {
            fputs("[", out);
            for (int h = 0; h < L * NH; h++) {
                fputs(h ? ",[" : "[", out);
                for (int k = 0; k < NUM_SCORES; k++) {
                    fputs(k ? ",[" : "[", out);
                    json_number(out, view->scores[h].value[k]);
                    fputs(",", out);
                    json_number(out, view->scores[h].uniform[k]);
                    fputs("]", out);
                }
                fputs("]", out);
            }
            fputs("]", out);
        }
        fputs(",\"attn\":\"", out);
        base64_floats(out, view->attn, (size_t)L * NH * view->T * view->T);
        fputs("\"}", out);
    }
    fputs("]}", out);
    fputs(page_tail, out);
    if (ferror(out)) atomic_file_write_failed(&af);
    return atomic_file_commit(&af, err, err_len);
}
